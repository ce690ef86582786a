"""Collecting case directories: each case.yaml becomes a module of scenario tests.

pytest does not walk a case directory: `CaseDir` stands for it and collects its
`case.yaml` alone, so `input/`, `journal/` and whatever else a case holds never reach
pytest's per-file hooks. A case's `case.yaml` is collected as a `pytest.Module` whose
object is the one shared `scenario` module, so its test is a plain function that pytest
parametrizes: one test per case x repeat, and fixtures, `-k`, `-m`, `--lf` and IDEs all
work. Python scenarios bind to a case with `@pytest.mark.nodeval_case("<id>")` and are
parametrized the same way.

Collection reads case.yaml only (id, tags, repeat); the case's other files are read when
its first test runs (`load_case_cached`), and a bad one fails that case's tests, naming it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..case import CASE_FILE, CONFIG_FILE
from ..case.dataset import ROW_SEPARATOR
from ..errors import CaseFormatError, NodevalError
from .keys import case_index_key, cases_key, settings_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..case.directory import Case, CaseHead


@dataclass(frozen=True, slots=True)
class CaseRef:
    """The parameter of a scenario test: which case (and row of its dataset), which repeat."""

    case_id: str
    """The scenario's id: the case's, or `<case>/<row id>` for a row of a dataset case."""
    directory: str
    repeat: int
    row: str | None = None
    variant: str | None = None
    """The matrix variant's label (`model=a`), which `Settings.variants` holds."""

    @property
    def attempt(self) -> tuple[str, int]:
        """Which attempt the test checks: every test bound to one case (row, variant) and repeat."""
        return case_key(self.directory, self.row, self.variant), self.repeat

    @property
    def names(self) -> set[str]:
        """The ids --nodeval-case selects this test by: its scenario's, without its variant, and
        its case's (a dataset case's id selects every row, a case's every variant)."""
        without_variant = self.case_id.partition("@")[0]
        return {self.case_id, without_variant, without_variant.partition("/")[0]}

    @property
    def test_id(self) -> str:
        return self.case_id if self.repeat == 1 else f"{self.case_id}-r{self.repeat}"


@dataclass
class _Collected:
    """This process's view of the case roots, filled as collection reads case.yaml files."""

    heads: dict[str, CaseHead] = field(default_factory=dict)
    """By directory."""
    ids: dict[str, Path] = field(default_factory=dict)
    """Case id -> directory, to refuse duplicates."""
    tags: set[str] = field(default_factory=set)
    """Tags already registered as markers."""
    broken: dict[str, str] = field(default_factory=dict)
    """Directory -> why its files could not be loaded (each of its tests fails with it)."""
    templates: dict[pytest.Collector, _ItemTemplate | None] = field(default_factory=dict)
    """Per directory above case directories: how its cases' items are made (`_ItemTemplate`)."""
    marks: dict[tuple[str, ...], list[Any]] = field(default_factory=dict)
    """A case's tags as marks, by tags: cases share them (marks are frozen)."""
    ignorable: dict[tuple[str, int], bool] = field(default_factory=dict)
    """(Directory above case directories, how many pytest_ignore_collect implementations
    there are) -> whether anything could ignore their case.yaml."""


_collected_key = pytest.StashKey[_Collected]()


def _collected(config: pytest.Config) -> _Collected:
    state = config.stash.get(_collected_key, None)
    if state is None:
        state = config.stash[_collected_key] = _Collected()
    return state


class CaseDir(pytest.Directory):
    """A case directory. pytest collects its case.yaml and nothing else in it.

    case.yaml still goes through `pytest_ignore_collect` (--ignore, collect_ignore) when
    anything could ignore it, but not through other plugins' `pytest_collect_file`: it is the
    case's, not a YAML test.
    """

    own_conftest = True
    """Whether pytest loaded a conftest.py of this directory's own (known once it collects)."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        path = self.path / CASE_FILE
        self.own_conftest = _own_conftest_loaded(self)
        if _may_be_ignored(self) and self.ihook.pytest_ignore_collect(
            collection_path=path, config=self.config
        ):
            return []
        return [CaseFile.from_parent(self, path=path)]


def _own_conftest_loaded(case_dir: CaseDir) -> bool:
    """Whether pytest loaded a conftest.py in the case directory itself. It loads a
    directory's conftest files before it collects the directory, and registers each as a
    plugin named by its path; asking it spares a stat call per case (issue 33)."""
    conftest = os.path.join(case_dir.path, "conftest.py")
    return case_dir.config.pluginmanager.get_plugin(conftest) is not None


def _may_be_ignored(case_dir: CaseDir) -> bool:
    """`_could_be_ignored`, asked once for the case directories beside one another that
    have no conftest.py of their own: they see the same options, conftest files and hooks
    (asked again should a plugin implementing pytest_ignore_collect come in meanwhile)."""
    if case_dir.own_conftest:
        return _could_be_ignored(case_dir)
    answers = _collected(case_dir.config).ignorable
    key = (
        os.path.dirname(case_dir.path),
        len(case_dir.config.hook.pytest_ignore_collect.get_hookimpls()),
    )
    answer = answers.get(key)
    if answer is None:
        answer = answers[key] = _could_be_ignored(case_dir)
    return answer


def _could_be_ignored(case_dir: CaseDir) -> bool:
    """Whether pytest_ignore_collect could ignore this case's case.yaml. When pytest's own
    implementation is the only one and no --ignore, --ignore-glob, collect_ignore or
    collect_ignore_glob applies, it cannot: its other checks (__pycache__, a virtualenv,
    norecursedirs) never hold for a file. The hook's call, mostly those checks' stat calls
    on case.yaml, was a fifth of what the plugin added per case (issue 33)."""
    config = case_dir.config
    if config.getoption("ignore") or config.getoption("ignore_glob"):
        return True
    for impl in case_dir.ihook.pytest_ignore_collect.get_hookimpls():
        if _module_of(impl.plugin) != "_pytest.main":
            return True
    pathlist = getattr(config, "_getconftest_pathlist", None)  # what pytest's reads them with
    try:
        return (
            pathlist is None
            or pathlist("collect_ignore", path=case_dir.path) is not None
            or pathlist("collect_ignore_glob", path=case_dir.path) is not None
        )
    except TypeError:  # pytest's private reader changed: let its hook decide, as before
        return True


class CaseFile(pytest.Module):
    """A case directory's case.yaml, collected as a module holding the shared `test_scenario`."""

    head: CaseHead

    def _getobj(self) -> Any:
        from . import scenario as _scenario

        return _scenario

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        # The case directory's node holds the same path: one object for both (issue 33)
        directory = self.parent.path if isinstance(self.parent, CaseDir) else self.path.parent
        try:
            self.head = case_head(self.config, directory, self.path)
            _warn_if_stale(self.head)
        except NodevalError as exc:
            raise self.CollectError(str(exc)) from None
        if not os.path.isfile(os.path.join(directory, CONFIG_FILE)):
            return []  # your own agent's case: the Python tests bound to it are its tests
        key = self._neighbourhood()
        templates = _collected(self.config).templates
        if key is not None and (template := templates.get(key)) is not None:
            try:
                made_alike = template.items(self, *case_params(self.config, self.head))
            except (AttributeError, TypeError):  # pytest's CallSpec changed: its generic path
                templates[key] = made_alike = None
            if made_alike is not None:
                return made_alike
        # The shared module defines no fixtures and no xunit setup: Module.collect's
        # parsefactories and its walk over the module's names would find nothing new.
        made = self.ihook.pytest_pycollect_makeitem(
            collector=self, name="test_scenario", obj=self.obj.test_scenario
        )
        items: list[pytest.Item | pytest.Collector] = (
            [] if made is None else made if isinstance(made, list) else [made]
        )
        if key is not None and key not in templates:
            templates[key] = _ItemTemplate.of(items) if _only_known_hooks(self.ihook) else None
        return items

    def _neighbourhood(self) -> pytest.Collector | None:
        """The node whose fixtures and hooks this case's test sees, as do the cases beside it:
        the directory above the case directory. None when the case directory has fixtures or
        hooks of its own (a conftest.py) or is not collected as a `CaseDir`."""
        if not isinstance(self.parent, CaseDir) or self.parent.own_conftest:
            return None
        return self.parent.parent


def _warn_if_stale(head: CaseHead) -> None:
    if head.spec.freshness is None:
        return
    overdue = head.stale_by()
    if overdue is not None:
        import warnings

        from ..errors import NodevalWarning

        warnings.warn(
            NodevalWarning(
                f"case '{head.id}' ({head.directory / CASE_FILE}): its journal is "
                f"{overdue.days} day(s) past its freshness window ({head.spec.freshness}); "
                f"re-record it with `nodeval record {head.directory}`"
            ),
            stacklevel=1,  # about a case's file: no caller's line would say more
        )


def case_head(config: pytest.Config, directory: Path, case_file: Path | None = None) -> CaseHead:
    """The case's case.yaml, read once per process; ids must be unique across the roots."""
    state = _collected(config)
    key = str(directory)
    head = state.heads.get(key)
    if head is None:
        head = _case_head_reader()(directory, case_file)
        other = state.ids.setdefault(head.id, directory)
        if other != directory:
            raise CaseFormatError(
                f"duplicate case id {head.id!r}: {other / CASE_FILE} and "
                f"{directory / CASE_FILE}; case ids must be unique"
            )
        for tag in head.spec.tags:
            if tag not in state.tags:
                state.tags.add(tag)
                config.addinivalue_line("markers", f"{tag}: cases tagged '{tag}' (pytest-nodeval)")
        state.heads[key] = head
    return head


@functools.cache
def _case_head_reader() -> Callable[[Path, Path | None], CaseHead]:
    """`read_case_head`, imported once: its module loads pydantic, which a run without cases
    does without, and an import statement in `case_head` costs a microsecond a case."""
    from ..case.directory import read_case_head

    return read_case_head


def case_key(directory: str | Path, row: str | None, variant: str | None = None) -> str:
    """A case's (a dataset row's, a variant's) key among the cases this process loaded."""
    key = str(directory) if row is None else f"{directory}#{row}"
    return key if variant is None else f"{key}@{variant}"


def load_case_cached(
    config: pytest.Config, directory: Path, row: str | None = None, variant: str | None = None
) -> Case:
    """The whole case (a dataset case: as `row` fills it in; in a matrix, as `variant` sets
    it), read once per process when its first test needs it.

    A file that cannot be read or validated fails the test (each of the case's tests)
    with the error naming the file, and no traceback.
    """
    cases = config.stash[cases_key]
    key = case_key(directory, row, variant)
    case = cases.get(key)
    if case is not None:
        return case
    state = _collected(config)
    if key not in state.broken:
        try:
            chosen = _variant(config, variant)
            case = cases[key] = case_head(config, directory).load(row, chosen)
            return case
        except NodevalError as exc:
            state.broken[key] = str(exc)
    from ..text import printable

    pytest.fail(printable(state.broken[key]), pytrace=False)


def _variant(config: pytest.Config, label: str | None) -> Any:
    """The run's `Variant` of this label (None outside a matrix)."""
    variants = settings_of(config).variants
    return next((v for v in variants if v.label == label), None) if label else None


def case_for(metafunc: pytest.Metafunc) -> CaseHead:
    parent = metafunc.definition.parent
    if isinstance(parent, CaseFile):
        return parent.head
    marker = metafunc.definition.get_closest_marker("nodeval_case")
    if marker is None or not marker.args:
        raise pytest.Collector.CollectError(
            f"{metafunc.definition.nodeid} uses nodeval_case but names no case; "
            "add @pytest.mark.nodeval_case('<case-id>')"
        )
    case_id = marker.args[0]
    try:
        directory = _case_index(metafunc.config).get(case_id)
        if directory is not None:
            return case_head(metafunc.config, directory)
    except NodevalError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    roots = ", ".join(str(r) for r in settings_of(metafunc.config).case_roots)
    raise pytest.Collector.CollectError(
        f"{metafunc.definition.nodeid}: no case with id {case_id!r} under {roots}"
    )


def _case_index(config: pytest.Config) -> dict[str, Path]:
    """Case id -> directory for every case under the roots (built once, for Python scenarios)."""
    if case_index_key not in config.stash:
        from ..case.directory import find_case_dirs, read_case_id

        heads = _collected(config).heads
        index: dict[str, Path] = {}
        for directory in find_case_dirs(list(settings_of(config).case_roots)):
            head = heads.get(str(directory))
            index.setdefault(head.id if head is not None else read_case_id(directory), directory)
        config.stash[case_index_key] = index
    return config.stash[case_index_key]


def case_params(config: pytest.Config, head: CaseHead) -> tuple[list[CaseRef], list[Any]]:
    """The parameters of a case's tests (one per row, variant and repeat), and its tags as
    marks."""
    settings = settings_of(config)
    tags = tuple(head.spec.tags)
    made_marks = _collected(config).marks
    marks = made_marks.get(tags)
    if marks is None:
        marks = made_marks[tags] = [getattr(pytest.mark, tag) for tag in tags]
    try:
        rows = [row.id for row in head.rows()]
    except NodevalError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    scenarios: list[tuple[str, str | None]] = [
        (f"{head.id}{ROW_SEPARATOR}{row}", row) for row in rows
    ] or [(head.id, None)]
    directory = str(head.directory)
    variants: list[str | None] = [v.label for v in settings.variants] or [None]
    refs = [
        CaseRef(scenario + (f"@{variant}" if variant else ""), directory, r, row, variant)
        for scenario, row in scenarios
        for variant in variants
        for r in range(1, settings.repeats_for(head.spec.repeat) + 1)
    ]
    return refs, list(marks)


def parametrize_case(metafunc: pytest.Metafunc) -> None:
    """One test per repeat of the case this test function belongs to (a dataset case: per row
    and repeat)."""
    refs, marks = case_params(metafunc.config, case_for(metafunc))
    metafunc.parametrize(
        "nodeval_case",
        [pytest.param(ref, id=ref.test_id, marks=marks) for ref in refs],
        indirect=True,
    )


# -- the same items without pytest's generic path ---------------------------------------------
#
# Every case directory's test is the one shared function, parametrized by `nodeval_case`
# alone. For the cases of one directory, pytest's generic path (a function definition, its
# fixture closure, a `Metafunc`, the pytest_generate_tests hook, `parametrize`) computes the
# same fixture closure and differs only in the parameter, so it runs for the first case there
# and the others' items are made from its result. That path was about 40% of the plugin's
# collection cost per case (benchmarks/README.md, "Collecting cases"). It reads two of
# pytest's internals, an item's `_fixtureinfo` and the fields of its `callspec` (the same in
# pytest 8.4 and 9.2); should they change, every case takes the generic path again, and
# tests/plugin/test_collection_cost.py compares the two paths' items field by field.

_KNOWN_HOOKS = frozenset(
    {
        # pytest's own implementations and anyio's (installed with httpx), which act on
        # nothing the shared function has (a parametrize mark, a fixture with params, a class,
        # a coroutine function); what they would do is in the first case's items
        "_pytest.python",
        "_pytest.fixtures",
        "_pytest.unittest",
        "anyio.pytest_plugin",
        __package__,
    }
)


def _only_known_hooks(ihook: Any) -> bool:
    """Whether only the implementations above take part in making this case's items: another
    plugin's or a conftest's pytest_generate_tests or pytest_pycollect_makeitem gets pytest's
    generic path, as it would see each case there."""
    return all(
        _module_of(impl.plugin) in _KNOWN_HOOKS
        for hook in (ihook.pytest_generate_tests, ihook.pytest_pycollect_makeitem)
        for impl in hook.get_hookimpls()
    )


def _module_of(plugin: object) -> str:
    return getattr(plugin, "__name__", None) or type(plugin).__module__


_SAFE_ID = re.compile(r"[A-Za-z0-9_.:/@=+,-]+")
"""Ids that pytest keeps as they are (it escapes non-ASCII, non-printable and backslashes)."""


_PER_ITEM = frozenset({"params", "indices", "_idlist", "marks"})
"""The fields of a callspec that differ from one item of a case to the next."""


@dataclass(frozen=True, slots=True)
class _ItemTemplate:
    """What pytest's generic path made for the first case of a directory: the fixture closure
    and a parametrization by `nodeval_case` alone, which the other cases' items share."""

    fixtureinfo: Any
    callspec_type: type
    shared: dict[str, Any]
    """The callspec's other fields (its `_arg2scope`), as `dataclasses.replace` would keep them."""
    function: Any
    """The shared `test_scenario`, as each item would look it up on its module."""

    @classmethod
    def of(cls, items: list[Any]) -> _ItemTemplate | None:
        """The template from one case's items; None if anything but `nodeval_case` took part
        (another parametrization, or a fixture closure of its own per item)."""
        if not items or not all(isinstance(item, pytest.Function) for item in items):
            return None
        callspec = getattr(items[0], "callspec", None)
        fixtureinfo = getattr(items[0], "_fixtureinfo", None)
        if (
            callspec is None
            or fixtureinfo is None
            or not all(
                getattr(item, "callspec", None) is not None
                and list(item.callspec.params) == ["nodeval_case"]
                and len(getattr(item.callspec, "_idlist", ())) == 1
                and getattr(item, "_fixtureinfo", None) is fixtureinfo
                for item in items
            )
        ):
            return None
        if not dataclasses.is_dataclass(callspec):  # pytest's CallSpec changed: generic path
            return None
        fields = {f.name: getattr(callspec, f.name) for f in dataclasses.fields(callspec) if f.init}
        if not fields.keys() >= _PER_ITEM:
            return None
        shared = {name: value for name, value in fields.items() if name not in _PER_ITEM}
        return cls(fixtureinfo, type(callspec), shared, items[0].obj)

    def items(
        self, collector: CaseFile, refs: list[CaseRef], marks: list[Any]
    ) -> list[pytest.Item | pytest.Collector] | None:
        """This case's items as the generic path would make them; None when its ids are ones
        pytest would escape or make unique (then the generic path makes them)."""
        ids = [ref.test_id for ref in refs]
        if (len(ids) > 1 and len(set(ids)) != len(ids)) or not all(map(_SAFE_ID.fullmatch, ids)):
            return None
        applied = [mark.mark for mark in marks]
        items: list[pytest.Item | pytest.Collector] = []
        for index, (ref, test_id) in enumerate(zip(refs, ids, strict=True)):
            callspec = self.callspec_type(
                params={"nodeval_case": ref},
                indices={"nodeval_case": index},
                _idlist=[test_id],
                marks=list(applied),
                **self.shared,
            )
            items.append(
                pytest.Function.from_parent(
                    collector,
                    name=f"test_scenario[{test_id}]",
                    callspec=callspec,
                    callobj=self.function,
                    fixtureinfo=self.fixtureinfo,
                    keywords={test_id: True},
                    originalname="test_scenario",
                )
            )
        return items
