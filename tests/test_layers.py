"""The package's layers are the layers docs/design.md section 13 describes: every import of a gpuplan
module points down (or within its own layer), nothing imports in a cycle, and imports sit at the top
of their module (an import inside a function is how cycles hide), except optional third-party ones."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "optimizer"

# Lowest first. A module's layer is the first prefix that matches its dotted name.
LAYERS = [
    ("errors", "physics.constants", "money"),
    ("inputs",),
    ("physics",),
    ("results",),
    ("planning",),
    ("solver",),
    ("explain",),
    ("api",),
    ("present",),
    ("server",),
    ("cli", "cli_options", "launch", "stops", "__main__", "__init__"),
]
OPTIONAL_THIRD_PARTY = {"matplotlib", "matplotlib.pyplot"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> int:
    for rank, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"module {module!r} is in no layer; add it to LAYERS and docs/design.md section 13")


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported gpuplan module, line, at top level) for every import in the file."""
    module = _module_name(path)
    if path == PACKAGE / "__init__.py":
        package: list[str] = []
    else:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    tree = ast.parse(path.read_text())
    # top level: the module's own statements, and those under a top-level ``if TYPE_CHECKING:`` (imports
    # for type checkers only, of a package root that loads its names on first use)
    top = {id(node) for node in tree.body}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            top |= {id(child) for child in node.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if not (node.module or "").startswith("optimizer"):
                    continue
                base = (node.module or "").split(".")[1:]
            else:
                base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            names = [".".join(base + [a.name]) for a in node.names]
            target = ".".join(base)
            # "from . import units" imports a module; "from .x import y" imports from module x
            for name in names:
                if (PACKAGE / Path(*name.split("."))).with_suffix(".py").exists() or (
                    PACKAGE / Path(*name.split("."))
                ).is_dir():
                    target = name
                if target:
                    out.append((target, node.lineno, id(node) in top))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("optimizer."):
                    out.append((alias.name.split(".", 1)[1], node.lineno, id(node) in top))
                elif id(node) not in top and alias.name not in OPTIONAL_THIRD_PARTY:
                    out.append((f"<third party {alias.name}>", node.lineno, False))
    return out


def _graph() -> dict[str, list[tuple[str, int, bool]]]:
    return {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py") if "_bundled" not in p.parts}


def test_every_import_points_down_the_layers():
    upward = []
    for module, imports in _graph().items():
        for target, line, _ in imports:
            if target.startswith("<"):
                continue
            if _layer(target) > _layer(module):
                upward.append(f"{module}:{line} imports {target}")
    assert not upward, "upward imports:\n" + "\n".join(upward)


# The faces are thin clients of the library (issue 50): the command line and the service parse with ``inputs``,
# ask ``api`` and show with ``present`` (``errors`` and ``results`` are the library's words for what went wrong
# and what came back). What they need of the physics, the planning, the solver or the explanations comes
# through ``api``; the CLI's own modules (its options, the ^C handling, the package root's version) and the
# service it starts (``gpuplan serve``) are the faces' own.
FACES = ("cli", "cli_options", "server")
FACES_MAY_IMPORT = ("api", "inputs", "present", "errors", "results", "cli", "cli_options", "server", "stops", "launch")


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _faces_reaching_past_the_api(graph: dict[str, list[tuple[str, int, bool]]]) -> list[str]:
    return [
        f"{module}:{line} imports {target}"
        for module, imports in graph.items()
        if _under(module, FACES)
        for target, line, _ in imports
        if not target.startswith("<") and not _under(target, FACES_MAY_IMPORT)
    ]


def test_the_faces_import_only_the_api_the_inputs_and_the_presentation():
    reaching = _faces_reaching_past_the_api(_graph())
    assert not reaching, "the faces reach past the API (add what they need to optimizer/api.py):\n" + "\n".join(
        reaching
    )


def test_the_face_rule_sees_a_face_reaching_the_solver():
    # The rule cannot pass vacuously: a service module importing the solver or the planning is caught, and a
    # command importing the API, the inputs or the presentation is not (a made-up graph: no file is written).
    graph = {
        "server.probe": [("api", 1, True), ("solver.roles", 2, True)],
        "cli.probe": [("planning.plans", 1, True), ("inputs.schema", 2, True), ("present.render", 3, True)],
        "present.probe": [("solver.roles", 1, True)],
    }
    assert _faces_reaching_past_the_api(graph) == [
        "server.probe:2 imports solver.roles",
        "cli.probe:1 imports planning.plans",
    ]


# Imports made inside a function on purpose: the command's entry point installs its ^C handler before the
# CLI's modules load (``optimizer/launch.py``); the Hugging Face Hub client (with httpx, 0.1 s to import)
# loads only when a model is named by its Hub id (``optimizer/inputs/hub.py``), not on every command.
# ``gpuplan serve`` loads FastAPI and uvicorn (``optimizer/server/app.py``) only when it runs, so that the CLI
# works without the serve extra and says how to install it.
DEFERRED = {("launch", "cli"), ("inputs.hub", "<third party huggingface_hub>"), ("server", "server.app")}


def test_imports_sit_at_the_top_of_their_module():
    hidden = [
        f"{module}:{line} imports {target} inside a function"
        for module, imports in _graph().items()
        for target, line, at_top in imports
        if not at_top and (module, target) not in DEFERRED
    ]
    assert not hidden, "\n".join(hidden)


def test_no_import_cycles():
    graph = {
        m: sorted({t for t, _, _ in imports if not t.startswith("<") and t != m}) for m, imports in _graph().items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_import(tmp_path):
    # The test cannot pass vacuously: a physics module importing the solver is caught.
    bad = PACKAGE / "physics" / "_layer_probe.py"
    bad.write_text("from ..solver.model import PlanModel\n")
    try:
        offenders = [t for t, _, _ in _imports(bad)]
        assert offenders == ["solver.model"] and _layer("solver.model") > _layer("physics._layer_probe")
    finally:
        bad.unlink()
