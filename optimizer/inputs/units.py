"""Parsing of the quantities people type: sizes, durations, prices, counts.

Every unit conversion in gpuplan happens here, so the physics and the solver only ever see bytes,
seconds, USD, FLOP/s and plain counts. Decimal and binary prefixes are kept apart on purpose:
``180GB`` is 180e9 bytes, ``160Gi`` / ``160GiB`` is 160 * 2**30 bytes (Kubernetes spelling), and
a B200's 180 GB label is therefore 167.6 GiB (seed 000).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

from ..errors import UnitError
from ..physics.constants import BATCH_POWER_OF_TWO_TOLERANCE, BATCH_SEQUENCE_MULTIPLE, GIB

GB = 10**9

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "k": 10**3,
    "ki": 2**10,
    "kib": 2**10,
    "mi": 2**20,
    "mib": 2**20,
    "gi": 2**30,
    "gib": 2**30,
    "ti": 2**40,
    "tib": 2**40,
}

_DURATION_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 7 * 86400,
    "week": 7 * 86400,
    "weeks": 7 * 86400,
}

_COUNT_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"

# "16xB200", "4 * RTX-PRO-6000": a GPU count and a SKU or offer name, as --measured and --role write them (two groups)
# (ASCII digits, as _NUMBER reads them; at most 30, as a file's integers: int() refuses 4,300)
GPUS_X_SKU = r"([0-9]{1,30})\s*[xX*]\s*([A-Za-z0-9._-]+)"


def _finite(number: float, value: object, what: str) -> float:
    """``number`` if it is a finite float: ``.nan``, ``.inf`` and ``1e400`` (which overflows to infinity)
    are not quantities, and would later overflow ``int()`` or the solver's integer arithmetic."""
    if not math.isfinite(number):
        raise UnitError(
            f"{value!r} is not a finite number, so it cannot be {what}; check for a typo (a value past 1e308 "
            "overflows, and .inf / .nan are not quantities)"
        )
    return number


def _ascii(value: object) -> bool:
    """Whether ``value`` is a number or text of ASCII characters only: Python's ``int()`` and ``float()`` read
    other scripts' digits ('١٢' as 12) and ``str.isdigit`` takes '²', while every unit here reads 0-9 only
    (``_NUMBER``), so a flag that used them took what the others refused, and '²' ended in a ValueError."""
    return not isinstance(value, str) or value.isascii()


def _without_thousands(text: str, value: object, what: str) -> str:
    """``text`` with the commas that group thousands (``20,000``, ``1,234.5``) removed; a comma anywhere
    else (``5,50``, a decimal comma, or ``1,5``) is refused, not dropped: read as a separator it would
    make $5,50/h cost $550/h."""
    if "," not in text:
        return text
    for match in re.finditer(r"[0-9,]*,[0-9,]*", text):
        if not re.fullmatch(r"[0-9]{1,3}(?:,[0-9]{3})+", match.group()) or text[match.end() : match.end() + 1] == ",":
            raise UnitError(
                f"cannot read {value!r} as {what}: a comma only groups thousands (20,000); for a fraction "
                "write a point (5.50)"
            )
    return text.replace(",", "")


def _number_and_unit(text: str, what: str, example: str) -> tuple[float, str]:
    plain = _without_thousands(text, text, what).replace("_", "")
    match = re.fullmatch(r"\s*" + _NUMBER + r"\s*([A-Za-z/]*)\s*", plain)
    if not match:
        raise UnitError(f"cannot read {text!r} as {what}; write it like {example}")
    return float(match.group(1)), match.group(2)


# A bare number is bytes, but one below a mebibyte is no memory size anyone means: "activation_reserve: 40"
# or "--min-memory 160" was read as 40 or 160 bytes, and the reserve or the filter silently did nothing.
MIN_BARE_BYTES = 2**20


def parse_bytes(value: str | int | float, what: str = "a size") -> float:
    """``180GB`` -> 1.8e11, ``160Gi`` -> 160 * 2**30, ``2.1TB`` -> 2.1e12; a bare number is bytes (0, or at
    least ``MIN_BARE_BYTES``: a smaller one lacks its unit)."""
    if isinstance(value, bool):
        raise UnitError(f"cannot read {value!r} as {what}; write it like 180GB or 160GiB")
    if isinstance(value, (int, float)):
        number, unit = float(value), ""
    else:
        number, unit = _number_and_unit(str(value), what, "180GB, 167.6GiB or 160Gi")
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise UnitError(f"unknown size unit {unit!r} in {value!r}; use GB/TB (10^9, 10^12) or GiB/Gi/TiB (2^30, 2^40)")
    if unit == "" and 0 < number < MIN_BARE_BYTES:
        raise UnitError(
            f"{value if isinstance(value, str) else f'{number:g}'!r} has no unit, and as a plain number of bytes "
            "it is no memory size anyone means; write "
            f"the unit, like {number:g}GB or {number:g}GiB"
        )
    return _finite(number * factor, value, what)


def parse_bytes_or_fraction(value: str | int | float, what: str = "a size") -> float:
    """A size (``parse_bytes``), or a bare number in [0, 1): a fraction of the GPU's memory, returned as it
    is (``activation_reserve: 0.2``, ``--reserve 0.2``)."""
    if not isinstance(value, bool):
        try:
            number = float(value) if _ascii(value) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if 0 <= number < 1:
            return number
        if 1 <= number < MIN_BARE_BYTES:  # 1.0 is a fraction written whole, not one byte
            raise UnitError(
                f"{value!r} is a bare number: a fraction of the GPU's memory, which must be below 1 (1 would leave "
                "nothing for the job); for a size write the unit, like 20GB or 16GiB"
            )
    return parse_bytes(value, what)


def parse_duration_s(value: str | int | float, what: str = "a duration") -> float:
    """``5d`` -> 432000 s, ``36h``, ``90m``, ``1w``; a bare number is hours (what people mean in a plan)."""
    if isinstance(value, bool):
        raise UnitError(f"cannot read {value!r} as {what}; write it like 5d, 36h or 90m")
    if isinstance(value, (dt.date, dt.datetime)):  # YAML reads 2027-01-04 as a date
        raise UnitError(f"{value.isoformat()} is a date, and {what} is a length of time: write it like 5d or 36h")
    if isinstance(value, (int, float)):
        return _finite(float(value) * 3600.0, value, what)
    text = str(value).strip()
    part = r"([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*"
    parts = re.findall(part, text)
    # the whole text is parts, and a part without a unit (hours) stands alone: "1.2.3h", "5h garbage",
    # "x5h" and "5 h 5" are typos, not 1.5, 5, 5 and 10 hours
    if not re.fullmatch(f"(?:{part})+", text) or (len(parts) > 1 and any(not unit for _, unit in parts)):
        raise UnitError(f"cannot read {value!r} as {what}; write it like 5d, 36h, 90m or 1d12h")
    total = 0.0
    for number, unit in parts:
        factor = _DURATION_UNITS.get(unit.lower() or "h")
        if factor is None:
            raise UnitError(f"unknown time unit {unit!r} in {value!r}; use s, m, h, d or w")
        total += float(number) * factor
    return _finite(total, value, what)


def parse_time_limit_s(value: str | int | float, what: str = "a time limit") -> float:
    """A solver time limit: a bare number is seconds (``--time-limit 60``), or a duration with its unit
    (``90s``, ``2m``)."""
    if not isinstance(value, bool) and _ascii(value):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return parse_duration_s(value, what)
        return _finite(number, value, what)  # '1e400' is a number past range, not a duration misread
    return parse_duration_s(value, what)


def parse_usd(value: str | int | float, what: str = "an amount in USD") -> float:
    """``$20,000`` / ``20k`` / ``20000`` -> 20000.0."""
    if isinstance(value, bool):
        raise UnitError(f"cannot read {value!r} as {what}; write it like $20,000 or 20k")
    if isinstance(value, (int, float)):
        return _finite(float(value), value, what)
    text = str(value).strip().replace("$", "").replace("USD", "").replace("usd", "")
    number, unit = _number_and_unit(text, what, "$20,000 or 20k")
    factor = _COUNT_SUFFIX.get(unit.lower())
    if factor is None:
        raise UnitError(f"cannot read {value!r} as {what}; write it like $20,000 or 20k")
    return _finite(number * factor, value, what)


def parse_price_per_hour(value: str | int | float, what: str = "a price per GPU-hour") -> float:
    """``$5.50/h``, ``5.50``, ``$5.50/hr``, ``$132/day`` -> USD per hour."""
    if isinstance(value, bool):
        raise UnitError(f"cannot read {value!r} as {what}; write it like $5.50/h")
    if isinstance(value, (int, float)):
        return _finite(float(value), value, what)
    text = str(value).strip().replace("$", "").replace("USD", "").replace(" ", "")
    amount, _, per = text.partition("/")
    per = per.lower()
    if per in ("gpu-hour", "gpu-hours", "gpu-hr", "gpu-hrs", "gpuh", "gpu-h"):  # whole words: not a prefix of
        per = "h"  # 'gpu-hours-extra', which had read as $/h
    if per in ("", "h", "hr", "hrs", "hour", "hours"):
        seconds = 3600.0
    elif per in _DURATION_UNITS:
        seconds = float(_DURATION_UNITS[per])
    else:
        raise UnitError(f"cannot read {value!r} as {what}; write it like $5.50/h")
    amount = _without_thousands(amount, value, what)
    try:
        if not _ascii(amount):
            raise ValueError(amount)
        usd = float(amount)
    except ValueError:
        raise UnitError(f"cannot read {value!r} as {what}; write it like $5.50/h") from None
    return _finite(usd * 3600.0 / seconds, value, what)


def fmt_budget(usd: float | None) -> str:
    """A budget in dollars and cents, or as written where it is not whole cents: '$1.499', not '$1.50' beside
    the $1.50 plan it refused ('n/a' for none)."""
    if usd is None:
        return "n/a"
    if abs(usd * 100 - round(usd * 100)) > 1e-6:
        return f"${usd:,.6f}".rstrip("0")
    return f"${usd:,.2f}"


def parse_count(value: str | int | float, what: str = "a count") -> float:
    """``70B`` -> 7e10 parameters, ``500M`` / ``2B`` tokens, ``14e9``, ``1.5T``, ``14.8k``."""
    if isinstance(value, bool):
        raise UnitError(f"cannot read {value!r} as {what}; write it like 70B, 500M or 14e9")
    if isinstance(value, (int, float)):
        return _finite(float(value), value, what)
    text = str(value).strip()
    for word in (" tokens", "tokens", " tok", "tok", " params", "params"):
        if text.lower().endswith(word):
            text = text[: -len(word)]
    number, unit = _number_and_unit(text, what, "70B, 500M or 14e9")
    factor = _COUNT_SUFFIX.get(unit.lower())
    if factor is None:
        raise UnitError(f"unknown suffix {unit!r} in {value!r}; use k, M, B or T (10^3 .. 10^12)")
    return _finite(number * factor, value, what)


RECOMPUTE_CHOICES = ("none", "selective", "full", "op")
# the most layers a layers:N recompute may name (the largest models have a few hundred)
RECOMPUTE_LAYERS_MAX = 10_000


def parse_recompute(value: object, what: str = "a recompute") -> str:
    """``none``, ``selective``, ``full`` (every layer), ``op`` (per-op selective: torchtitan's SAC) or ``layers:N``
    (full recompute of N layers of each pipeline stage, Megatron's --recompute-method block) in any case, as that
    lowercase label."""
    text = str(value).strip().lower()
    if text in RECOMPUTE_CHOICES:
        return text
    kind, colon, count = text.partition(":")
    if kind.strip() == "layers" and colon and re.fullmatch(r"[0-9]{1,9}", count.strip()):
        n = int(count.strip())
        if 1 <= n <= RECOMPUTE_LAYERS_MAX:
            return f"layers:{n}"
    raise UnitError(
        f"cannot read {value!r} as {what}; write none, selective, full (every layer), op (per-op selective, "
        f"torchtitan's SAC) or layers:N (full recompute of N layers of each pipeline stage, 1 to "
        f"{RECOMPUTE_LAYERS_MAX:,}, e.g. layers:12)"
    )


def parse_rate(value: str | int | float, what: str = "a throughput") -> float:
    """``14.8k tok/s`` / ``14800`` -> tokens per second."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _finite(float(value), value, what)
    text = str(value).strip().lower().replace("tokens", "tok").replace(" ", "")
    if text.endswith("tok/s"):
        text = text[:-5]
    elif text.endswith("/s"):
        text = text[:-2]
    try:
        return parse_count(text, what)
    except UnitError:
        raise UnitError(f"cannot read {value!r} as {what}; write it like 14.8k tok/s or 14800") from None


# --------------------------------------------------------------------------- sensible ranges

YEAR_S = 365 * 86400.0


@dataclass(frozen=True)
class Limit:
    """The range a kind of quantity must fall in, and why its upper end is where it is.

    Values are in base units (bytes, seconds, USD); ``scale`` and ``unit`` say how the range is shown.
    """

    low: float
    high: float
    unit: str
    reason: str
    low_inclusive: bool = False  # True: low itself is allowed (>=); False: only above it (>)
    scale: float = 1.0

    def allows(self, value: float) -> bool:
        try:
            number = float(value)
        except OverflowError:  # an integer past a float's range (a 400-digit flag or body): past every high end
            return False
        above = number >= self.low if self.low_inclusive else number > self.low
        return math.isfinite(number) and above and number <= self.high

    def text(self) -> str:
        def show(x: float) -> str:
            x /= self.scale
            return f"{x:,.0f}" if x == int(x) and abs(x) < 1e10 else f"{x:g}"

        low = f"at least {show(self.low)}" if self.low_inclusive else f"greater than {show(self.low)}"
        unit = f" {self.unit}" if self.unit else ""
        return f"must be {low} and at most {show(self.high)}{unit} ({self.reason})"


# Every number a user gives (in a file or a flag) falls in one of these ranges. NaN, infinity and
# values no training job comes near (a 100-year deadline, $1e300 per hour, a billion layers) are
# typos or hostile: unchecked, they overflow int() in the solver or make the search loop for hours.
# Each upper end is generous (tens to hundreds of times the largest real value) and says why.
LIMITS: dict[str, Limit] = {
    # model shapes
    "params": Limit(
        1e3,
        1e14,
        "parameters",
        "a thousand, a typo for a unit (7B), to 100T, fifty times the largest published model",
        True,
    ),
    "layers": Limit(1, 10_000, "layers", "a hundred times the deepest published transformer", True),
    "dense_layers": Limit(0, 10_000, "layers", "no more than the model's layers", True),
    "width": Limit(1, 2**20, "", "hidden, FFN and head widths: twenty times the widest published model", True),
    "heads": Limit(1, 2**16, "heads", "a hundred times the most attention heads published", True),
    "vocab": Limit(1, 2**27, "tokens", "a hundred times the largest published vocabulary", True),
    "experts": Limit(1, 2**16, "experts", "a hundred times the most experts published", True),
    "shared_experts": Limit(0, 2**16, "experts", "a hundred times the most experts published", True),
    "linear_modules": Limit(
        1, 64, "linears", "a block of seven linear layers unfused; 64 is no transformer block", True
    ),
    "activation_clamp": Limit(0, 1e6, "", "a clamp on pre-activation values (GPT-OSS: 7)", True),
    # the job
    "tokens": Limit(0, 1e16, "tokens", "10 quadrillion: hundreds of times the largest published training run"),
    "epochs": Limit(0, 10_000, "epochs", "fine-tunes run a few epochs"),
    "seq_len": Limit(1, 2**24, "tokens", "longer than any published training context", True),
    "global_batch": Limit(1, 2**30, "sequences", "published runs use thousands of sequences per step", True),
    "lora_rank": Limit(1, 2**16, "", "adapters use ranks of 4 to 256", True),
    "bytes_per_param": Limit(
        0.1, 1024, "bytes", "training state takes 2 to 20 bytes per parameter, 4-bit weights 0.5", True
    ),
    "rate": Limit(0, 1e12, "tokens/s", "a thousand times the throughput of the largest published cluster"),
    # job.roles (inputs/roles.py)
    "attention_width": Limit(
        0, 2**20, "", "heads x head_dim: twenty times the widest published model; 0 for none", True
    ),
    "element_bytes": Limit(0.5, 16, "bytes", "a tensor element: 4-bit (0.5) to 128-bit (16)", True),
    "bytes_per_token": Limit(
        0, 1e9, "bytes", "a GB a token: ten thousand times the hidden states a DFlash drafter takes (51 KB)"
    ),
    "rl_steps": Limit(1, 1e6, "steps", "published GRPO runs take hundreds to a few thousand steps", True),
    "forward_passes": Limit(0, 64, "passes", "GRPO runs two (reference and old log-probs) besides training", True),
    "reserve": Limit(0, 1e14, "GB", "100 TB: hundreds of times any GPU's memory", True, scale=1e9),
    # hardware and offers
    "memory": Limit(0, 1e14, "GB", "100 TB: hundreds of times any GPU's or node's memory", scale=1e9),
    "bandwidth": Limit(
        1e-3, 1e6, "GB/s", "1 MB/s, slower than any link a GPU has, to a hundred times any GPU's memory bandwidth", True
    ),
    "tflops": Limit(1e-3, 1e6, "TFLOPS", "a GFLOP/s, slower than any accelerator, to an exaFLOP per GPU", True),
    "fraction": Limit(
        1e-4,
        1,
        "",
        "a fraction of the nominal figure: real runs reach 0.1-0.9, and a denormal one divides by zero",
        True,
    ),
    "share": Limit(0, 1, "", "a share, 0 to 1", True),
    "gpus_per_node": Limit(1, 72, "GPUs", "the largest NVLink domain rented as one node, GB200 NVL72", True),
    "nodes": Limit(1, 4096, "nodes", "the candidate search covers up to 4,096 nodes per job", True),
    "offer_nodes": Limit(
        1,
        1024,
        "nodes",
        "every node count of an offer is a candidate: 1,024 of them take ~2 s and 0.3 GB to plan with a global "
        "batch, up to ~40 s and 2.5 GB for the largest models with a free batch",
        True,
    ),
    "gpus": Limit(1, 4096 * 72, "GPUs", "4,096 nodes of 72 GPUs", True),
    "pool_gpus": Limit(0, 4096 * 72, "GPUs", "4,096 nodes of 72 GPUs", True),
    "price": Limit(0, 1000, "USD per GPU-hour", "a hundred times the dearest GPU rental"),
    "preemptions": Limit(0, 100, "per node-hour", "more than one preemption a minute is no capacity", True),
    "failure_rate": Limit(0, 1, "per GPU-hour", "a failure every GPU-hour would stop any run", True),
    # money and time
    "budget": Limit(0.01, 1e10, "USD", "a cent to $10 billion, more than any training run has cost", True),
    "cost_tolerance": Limit(0, 1e10, "USD", "0 for none, up to the largest budget", True),
    "duration": Limit(0, 10 * YEAR_S, "h", "10 years: no GPU rental is planned further ahead", scale=3600),
    "offset": Limit(0, 10 * YEAR_S, "h", "10 years: no GPU rental is planned further ahead", True, scale=3600),
    "overhead": Limit(0, 30 * 86400, "h", "30 days of start-up or restart is a typo", True, scale=3600),
    "host_ms": Limit(0, 1000, "ms", "a second of host time per layer would make any MoE step launch-bound", True),
    "billing_increment": Limit(0, 31 * 86400, "h", "monthly billing is the coarsest there is", scale=3600),
    "priority": Limit(0, 1e6, "", "weights are relative: past a million to one they only overflow the objective"),
    # solver settings
    "time_limit": Limit(0, 86400, "s", "a day: CP-SAT answers most plans in seconds"),
    "workers": Limit(1, 64, "workers", "CP-SAT gains nothing past a few dozen workers", True),
}

# check's layout fields' ranges are declared with each field (inputs/layout_fields.py: LAYOUT_RANGES).

# The most time steps (horizon / time_step) a portfolio may have: each step is a point the scheduler
# reasons about; 100,000 is 11 years of hours or 69 days of minutes.
MAX_TIME_STEPS = 100_000

# The most candidate node counts a catalog may offer in all (each offer's max_nodes, twice with a spot
# price): every one is a row of the candidate table, at ~10 ms and ~1 MB per row for a 70B job.
MAX_CATALOG_NODES = 4096

# The most --measured flags one command takes: each one costs a calibration fit (~0.3 s).
MAX_MEASUREMENTS = 16


def check_range(value: float, kind: str, given: object = None) -> float:
    """``value`` if it falls in ``LIMITS[kind]``, else a ``UnitError`` stating the range and why
    (and ``given``, the text the value was read from, if not the value itself)."""
    limit = LIMITS[kind]
    if isinstance(value, bool) or not limit.allows(value):
        shown = repr(value if given is None else given)
        raise UnitError(f"{limit.text()} (got {shown if len(shown) <= 60 else shown[:40] + '...'})")
    return value


def fmt_bytes(n_bytes: float) -> str:
    """Both decimal and binary, since the two disagree by 7 % and vendors mix them."""
    return f"{n_bytes / GB:,.1f} GB ({n_bytes / GIB:,.1f} GiB)"


def fmt_duration(seconds: float) -> str:
    if seconds is None or math.isinf(seconds):
        return "never"
    hours = seconds / 3600.0
    if hours >= 48:
        return f"{hours / 24:,.1f} days"
    if hours >= 1:
        return f"{hours:,.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:,.0f} min"
    return f"{seconds:,.0f} s" if seconds >= 1 else f"{seconds:.2g} s"


def fmt_count(n: float) -> str:
    for factor, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= factor:
            return f"{n / factor:,.4g}{suffix}"
    return f"{n:,.4g}"


def batch_sequences(tokens: float, seq_len: int) -> int:
    """A global batch given in tokens as a sequence count that data-parallel layouts divide.

    ``4M tokens`` at 4,096 is 976.6 sequences; practitioners mean 1,024 (4 x 2^20 tokens). The nearest
    power of two is taken when it is within 5 %; otherwise the nearest multiple of 8 (a node's GPUs).
    """
    exact = tokens / seq_len
    if exact <= 1:
        return 1
    power = 2 ** round(math.log2(exact))
    if abs(power - exact) <= BATCH_POWER_OF_TWO_TOLERANCE * exact:
        return int(power)
    if exact < BATCH_SEQUENCE_MULTIPLE:
        return max(1, round(exact))
    return int(round(exact / BATCH_SEQUENCE_MULTIPLE) * BATCH_SEQUENCE_MULTIPLE)
