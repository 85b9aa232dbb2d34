"""What the input reader accepts and refuses, and what it says when it refuses.

Every refusal is a ``GpuplanError`` naming the file; the tests check that the path is in the message.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml
from paths import ROOT

from optimizer import load_job, load_portfolio
from optimizer.errors import GpuplanError
from optimizer.inputs.reader import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_NODES,
    forget_reads,
    load_json,
    load_yaml,
    read_json_file,
    read_text,
    read_yaml_file,
    was_read,
)
from optimizer.inputs.schema import Portfolio, Problem


def refused(call: Callable[[], Any], source: str | Path) -> GpuplanError:
    """Run ``call``, expect a GpuplanError about ``source``, and return it for further checks."""
    with pytest.raises(GpuplanError) as info:
        call()
    error = info.value
    assert str(source) in str(error), f"the message should name the file: {error}"
    assert error.source == str(source)
    return error


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def yaml_refused(text: str, source: str = "job.yaml") -> GpuplanError:
    return refused(lambda: load_yaml(text, source), source)


def json_refused(text: str, source: str = "config.json") -> GpuplanError:
    return refused(lambda: load_json(text, source), source)


# ---------------------------------------------------------------------------------------------------
# Which files are read at all
# ---------------------------------------------------------------------------------------------------


def test_a_normal_file_is_read_as_text(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", "job:\n  name: café\n")
    assert read_text(path, "job") == "job:\n  name: café\n"
    assert read_text(str(path), "job") == "job:\n  name: café\n"


def test_a_leading_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'\xef\xbb\xbf{"hidden_size": 4096}')
    assert read_json_file(path, "config.json") == {"hidden_size": 4096}


def test_a_missing_file_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    error = refused(lambda: read_text(path, "job"), path)
    assert "job file not found" in str(error)
    under_a_file = write(tmp_path, "plain.yaml", "a: 1\n") / "child.yaml"
    assert "not found" in str(refused(lambda: read_text(under_a_file, "job"), under_a_file))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file_is_refused_as_permission_denied(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", "a: 1\n")
    path.chmod(0)
    try:
        assert "permission denied" in str(refused(lambda: read_text(path, "job"), path))
    finally:
        path.chmod(0o644)


def call_with_timeout(call: Callable[[], Any], seconds: float, unblock: Callable[[], None]) -> Any:
    """Run ``call`` in a thread so a reader that wrongly blocks fails the test instead of hanging it."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        unblock()
        thread.join(seconds)
        pytest.fail(f"the call was still blocked after {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_as_the_job_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)

    def unblock() -> None:  # a writer that opens and closes lets a blocked reader see end-of-file
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    error = refused(lambda: call_with_timeout(lambda: read_yaml_file(fifo, "job"), 5, unblock), fifo)
    assert "named pipe" in str(error)
    assert "not a regular file" in str(error)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_dev_zero_is_refused_as_a_device_not_read_forever() -> None:
    error = refused(lambda: read_text("/dev/zero", "catalog"), "/dev/zero")
    assert "character device" in str(error)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    error = refused(lambda: read_text(tmp_path, "portfolio"), tmp_path)
    assert "is a directory" in str(error)
    assert "portfolio" in str(error)


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs unix sockets")
def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        try:
            server.bind(str(path))
        except OSError:
            pytest.skip("cannot bind a unix socket here")
        assert "socket" in str(refused(lambda: read_text(path, "job"), path))


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "catalog.yaml", "x" * 200)
    error = refused(lambda: read_text(path, "catalog", max_bytes=100), path)
    assert "larger than the 100 bytes limit" in str(error)
    assert "200 bytes" in str(error)
    assert read_text(path, "catalog", max_bytes=200) == "x" * 200  # exactly at the limit is fine


def test_the_default_size_limit_is_generous_for_real_files() -> None:
    assert MAX_FILE_BYTES >= 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_a_file_bigger_than_its_stat_size_is_still_bounded() -> None:
    # /proc files report a size of 0 but hold text, like a file that grows while it is read.
    assert os.stat("/proc/self/status").st_size == 0
    error = refused(lambda: read_text("/proc/self/status", "job", max_bytes=64), "/proc/self/status")
    assert "larger than the 64 bytes limit" in str(error)


def test_a_file_that_is_not_utf8_is_refused_with_the_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_bytes(b"job:\n  name: caf\xe9\n")  # Latin-1, not UTF-8
    error = refused(lambda: read_yaml_file(path, "job"), path)
    assert "not UTF-8" in str(error)
    assert "byte offset 16" in str(error)
    assert "line 2" in str(error)


# ---------------------------------------------------------------------------------------------------
# YAML: values
# ---------------------------------------------------------------------------------------------------


def test_ordinary_yaml_values_parse_as_before() -> None:
    data = load_yaml(
        "ints: [0, 7, -3, +4, 0o17, 0x1F]\n"
        "floats: [1.5, -0.25, .5, 1e9, 6.02e+23, .inf, -.Inf]\n"
        "bools: [true, false, True, FALSE]\n"
        "nulls: [~, null, Null, NULL]\n"
        "empty:\n"
        "start: 2027-01-04\n"
        "units: [3B, 5d, 36h, 14.77B, '$15,000']\n",
        "job.yaml",
    )
    assert data["ints"] == [0, 7, -3, 4, 15, 31]
    assert data["floats"][:-2] == [1.5, -0.25, 0.5, 1e9, 6.02e23]
    assert data["floats"][-2:] == [float("inf"), float("-inf")]  # the schema refuses these later
    assert data["bools"] == [True, False, True, False]
    assert data["nulls"] == [None, None, None, None]
    assert data["empty"] is None
    assert data["start"] == date(2027, 1, 4)
    assert data["units"] == ["3B", "5d", "36h", "14.77B", "$15,000"]
    assert math.isnan(load_yaml("x: .nan", "job.yaml")["x"])


def test_a_sexagesimal_looking_deadline_stays_a_string() -> None:
    # YAML 1.1 reads 1:30 as 90 (base 60); gpuplan follows YAML 1.2 and keeps what was written.
    assert load_yaml("deadline: 1:30", "job.yaml") == {"deadline": "1:30"}
    assert load_yaml("t: 1:30:00\nf: 1:30.5", "job.yaml") == {"t": "1:30:00", "f": "1:30.5"}


def test_yes_no_on_off_stay_strings() -> None:
    data = load_yaml("a: yes\nb: no\nc: on\nd: off\ne: Yes\nf: y\nno: 1", "job.yaml")
    assert data == {"a": "yes", "b": "no", "c": "on", "d": "off", "e": "Yes", "f": "y", "no": 1}


def test_leading_zeros_are_decimal_and_underscores_are_text() -> None:
    # YAML 1.1 reads 0755 as octal 493 and 1_000 as 1000; YAML 1.2 core does neither.
    assert load_yaml("a: 0755\nb: 1_000\nc: 0b101\nd: '='\ne: =", "job.yaml") == {
        "a": 755,
        "b": "1_000",
        "c": "0b101",
        "d": "=",
        "e": "=",
    }


def test_a_normal_job_with_anchors_and_merge_keys_still_loads() -> None:
    text = """\
defaults: &defaults
  seq_len: 4096
  global_batch: 128
model: &qwen {name: qwen3-14b, layers: 40}
jobs:
  - name: a
    <<: *defaults
    tokens: 3B
    model: *qwen
  - name: b
    <<: [*defaults, {precision: bf16}]
    seq_len: 8192      # overriding a merged key is not a duplicate
    model: *qwen
"""
    data = load_yaml(text, "portfolio.yaml")
    first, second = data["jobs"]
    assert first == {
        "name": "a",
        "seq_len": 4096,
        "global_batch": 128,
        "tokens": "3B",
        "model": {"name": "qwen3-14b", "layers": 40},
    }
    assert second["seq_len"] == 8192
    assert second["precision"] == "bf16"
    assert second["global_batch"] == 128


def test_every_bundled_problem_and_catalog_reads_as_it_did_with_safe_load() -> None:
    files = sorted([*ROOT.glob("problems/*.yaml"), *ROOT.glob("catalogs/*.yaml")])
    if not files:
        pytest.skip("no bundled files in this checkout")
    for path in files:
        with open(path, encoding="utf-8") as handle:
            expected = yaml.safe_load(handle)
        assert read_yaml_file(path, "job") == expected, path


def test_an_empty_yaml_file_is_none(tmp_path: Path) -> None:
    assert read_yaml_file(write(tmp_path, "empty.yaml", ""), "job") is None


# ---------------------------------------------------------------------------------------------------
# YAML: refusals
# ---------------------------------------------------------------------------------------------------


def test_a_duplicate_top_level_key_is_refused_with_both_lines() -> None:
    error = yaml_refused("catalog: default\nbudget: 1000\ncatalog: nodus\n")
    assert "duplicate key 'catalog' at line 3 (first at line 1); keep one" in str(error)
    assert error.field == "catalog"


def test_a_duplicate_nested_key_names_the_path() -> None:
    text = "job:\n  model: llama-8b\n  tokens: 3B\n  seq_len: 4096\n  tokens: 5B\n"
    error = yaml_refused(text)
    assert "duplicate key 'tokens' under 'job' at line 5 (first at line 3)" in str(error)
    assert error.field == "job.tokens"


def test_a_duplicate_key_inside_a_list_item_names_the_index() -> None:
    error = yaml_refused("jobs:\n  - name: a\n  - name: b\n    file: x.yaml\n    name: c\n")
    assert "under 'jobs[1]'" in str(error)
    assert error.field == "jobs[1].name"


def test_keys_that_read_as_the_same_value_are_duplicates() -> None:
    assert "duplicate key" in str(yaml_refused("1: a\n01: b\n"))
    assert "duplicate key" in str(yaml_refused("{~: a, null: b}"))
    assert load_yaml("1: a\n'1': b\n", "job.yaml") == {1: "a", "1": "b"}  # an int and a string differ


def test_two_merge_keys_in_one_mapping_are_refused_with_the_list_form_suggested() -> None:
    error = yaml_refused("a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: *a\n  <<: *b\n")
    assert "<<: [*a, *b]" in str(error)


def test_billion_laughs_is_refused_quickly_and_in_little_memory() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    text = "\n".join(lines)  # under 400 bytes, 9**9 = 387 million "lol"s when expanded
    tracemalloc.start()
    started = time.perf_counter()
    try:
        error = yaml_refused(text)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"more than {MAX_NODES:,} values" in str(error)
    assert "aliases" in str(error)
    assert elapsed < 2.0
    assert peak < 50 * 2**20


def test_a_long_string_repeated_by_aliases_is_refused() -> None:
    text = 's: &s "' + "x" * 1000 + '"\nl: [' + ", ".join(["*s"] * 20_000) + "]\n"  # 20 MB once expanded
    error = yaml_refused(text)
    assert "of text" in str(error)


def test_a_recursive_alias_is_refused() -> None:
    error = yaml_refused("a: &a\n  - 1\n  - *a\n")
    assert "alias '*a' at line 3" in str(error)
    assert "endless" in str(error)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[" * 5000 + "]" * 5000, id="flow lists"),
        pytest.param("{a: " * 5000 + "1" + "}" * 5000, id="flow mappings"),
        pytest.param("".join("  " * i + "- \n" for i in range(200)) + "  " * 200 + "x\n", id="block lists"),
        pytest.param("".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "x\n", id="block maps"),
    ],
)
def test_deep_nesting_in_yaml_is_refused_without_recursion_error(text: str) -> None:
    error = yaml_refused(text)
    assert f"more than {MAX_DEPTH} levels" in str(error)


def test_nesting_at_the_depth_limit_is_accepted() -> None:
    assert load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "job.yaml") is not None


def test_aliases_cannot_stack_nesting_past_the_limit() -> None:
    half = MAX_DEPTH // 2 + 8
    text = f"a: &a {'[' * half}1{']' * half}\nb: {'[' * half}*a{']' * half}\n"
    assert f"more than {MAX_DEPTH} levels" in str(yaml_refused(text))


def test_malformed_yaml_gives_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "job.yaml", "job:\n  tokens: 3B\n   seq_len: 4096\n")
    error = refused(lambda: read_yaml_file(path, "job"), path)
    assert "malformed YAML at line 3" in str(error)
    assert "column" in str(error)
    error = yaml_refused("job:\n  gpus: [1, 2\n")
    assert "line 3" in str(error)


def test_an_unknown_tag_and_a_second_document_are_refused() -> None:
    error = yaml_refused("a: !!python/object/apply:os.system [echo hi]\n")
    assert "the tag '!!python/object/apply:os.system' is not allowed" in str(error)
    assert "!thing' is not allowed" in str(yaml_refused("a: !thing x\n"))
    assert "keep one document" in str(yaml_refused("a: 1\n---\nb: 2\n"))


def test_explicit_tags_with_impossible_values_are_refused_not_crashed_on() -> None:
    assert "is not true or false" in str(yaml_refused("a: !!bool maybe\n"))
    assert "is not true or false" in str(yaml_refused("!!bool maybe: 1\n"))  # also as a key
    assert "is not an integer" in str(yaml_refused("a: !!int 3B\n"))
    assert "is not a number" in str(yaml_refused("a: !!float 1:30\n"))
    assert load_yaml("a: !!str 1:30\nb: !!int '42'\n", "job.yaml") == {"a": "1:30", "b": 42}


def test_a_control_character_in_yaml_is_refused_with_its_position() -> None:
    error = yaml_refused("a: 1\nb: x\x01y\n")
    assert "line 2, column 5" in str(error)


def test_an_absurdly_long_integer_in_yaml_is_refused() -> None:
    error = yaml_refused("tokens: " + "9" * 40 + "\n")
    assert "more than 30 digits" in str(error)


# ---------------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------------


def test_a_normal_config_json_loads(tmp_path: Path) -> None:
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 4096,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "tie_word_embeddings": False,
        "vocab_size": 128256,
    }
    path = write(tmp_path, "config.json", json.dumps(config, indent=2))
    assert read_json_file(path, "config.json") == config


def test_a_duplicate_key_in_json_is_refused_with_its_path_and_line() -> None:
    error = json_refused('{\n  "hidden_size": 4096,\n  "hidden_size": 8192\n}')
    assert "duplicate key 'hidden_size' at line 3 (first at line 2)" in str(error)
    assert error.field == "hidden_size"
    error = json_refused('{"text_config": {"layers": [{"a": 1, "a": 2}]}}')
    assert "under 'text_config.layers[0]'" in str(error)
    assert error.field == "text_config.layers[0].a"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_in_json_are_refused(literal: str) -> None:
    error = json_refused('{"rope_theta": 10000,\n "eps": ' + literal + "}")
    assert literal in str(error)
    assert "line 2" in str(error)
    assert error.field == "eps"


def test_a_huge_number_in_json_is_refused() -> None:
    error = json_refused('{"vocab_size": ' + "1" * 31 + "}")
    assert "more than 30 digits" in str(error)
    assert error.field == "vocab_size"
    assert "too large" in str(json_refused('{"x": 1e400}'))  # would silently become infinity
    assert load_json('{"n": ' + "9" * 30 + "}", "config.json") == {"n": int("9" * 30)}


def test_deep_nesting_in_json_is_refused_without_recursion_error() -> None:
    for text in ("[" * 5000 + "]" * 5000, '{"a": ' * 5000 + "1" + "}" * 5000, "[" * 100_000):
        assert f"more than {MAX_DEPTH} levels" in str(json_refused(text))


def test_brackets_inside_json_strings_do_not_count_as_nesting() -> None:
    text = json.dumps({"chat_template": "[" * 500 + '\\"{' * 100})
    assert load_json(text, "config.json") == json.loads(text)


def test_malformed_json_gives_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "config.json", '{\n  "hidden_size": 4096,\n  "layers": \n}')
    error = refused(lambda: read_json_file(path, "config.json"), path)
    assert "malformed JSON at line 4, column 1" in str(error)


# ---------------------------------------------------------------------------------------------------
# Sanity of the harness itself
# ---------------------------------------------------------------------------------------------------


def test_the_timeout_helper_fails_a_blocked_call_instead_of_hanging() -> None:
    release = threading.Event()
    with pytest.raises(pytest.fail.Exception):
        call_with_timeout(lambda: release.wait(30), 0.2, release.set)
    assert sys.getrecursionlimit() > MAX_DEPTH * 4  # the depth cap stays well inside the recursion limit


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "problems").glob("*.yaml")))
def test_a_file_dumped_under_its_own_names_reads_back_as_the_same_model(name: str) -> None:
    # Durations are stored in seconds and a bare number reads as hours: dumped by alias they carry
    # their unit ("1814400s"), so an API user who writes a problem or portfolio back loses nothing.
    path = ROOT / "problems" / name
    model = load_portfolio(path) if name.startswith("portfolio") else load_job(path)
    again = (Portfolio if name.startswith("portfolio") else Problem).model_validate(model.model_dump(by_alias=True))
    assert again.model_dump() == model.model_dump()


def test_each_file_read_is_remembered_for_one_command(tmp_path):
    """Outputs may not replace a file the command read, by any path (a link too); the record starts anew
    with each command, as a deleted file's inode is reused by the next file made."""
    read = tmp_path / "job.yaml"
    read.write_text("a: 1\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(read)
    other = tmp_path / "other.yaml"
    other.write_text("b: 2\n")
    forget_reads()
    read_text(read, "job")
    assert was_read(read) and was_read(link) and not was_read(other) and not was_read(tmp_path / "missing")
    forget_reads()
    assert not was_read(read)


def test_the_bundled_files_read_the_same_with_the_strict_and_the_fast_loader():
    # gpuplan's own catalogs and presets are read with libyaml (0.09 s -> 0.01 s a command); the strict
    # loader, which every user file takes, must accept each of them and give the same data
    from optimizer.inputs.bundled import bundled_dir
    from optimizer.inputs.reader import load_yaml, read_bundled_yaml, read_text

    files = sorted(bundled_dir("catalogs").glob("*.yaml"))
    assert len(files) >= 5
    for path in files:
        assert read_bundled_yaml(path, "catalog") == load_yaml(read_text(path, "catalog"), str(path)), path.name
