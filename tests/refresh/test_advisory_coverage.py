"""Coverage of affected versions by interval arithmetic, against brute force: a refresh that
leaves any once-affected version unaffected narrows an advisory (a downgrade)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floorctl import coverage
from floorctl.coverage import Interval
from floorguard._maps.map_model import AffectedRange, RangeAdvisory
from floorguard._maps.verdict import in_range

# Bounds come from GRID; SAMPLES hold every bound, a version between each two neighbours
# and one beyond each end, so every gap the arithmetic can see holds a sampled version and
# brute force over SAMPLES decides coverage exactly.
PYPI_GRID = [str(n) for n in range(1, 8)]
PYPI_SAMPLES = ["0.5", *[v for n in range(1, 8) for v in (str(n), f"{n}.5")]]
NPM_GRID = ["1.0.0-alpha", "1.0.0-beta.2", "1.0.0", "1.0.1", "2.0.0-rc.1", "2.0.0", "3.0.0"]
NPM_SAMPLES = [
    "0.0.1",
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-beta.2",
    "1.0.0-beta.3",
    "1.0.0",
    "1.0.1-0",
    "1.0.1",
    "1.5.0",
    "2.0.0-rc.1",
    "2.0.0-rc.2",
    "2.0.0",
    "2.5.0",
    "3.0.0",
    "4.0.0",
]


def _range(grid: list[str]) -> st.SearchStrategy[AffectedRange]:
    index = st.integers(min_value=0, max_value=len(grid) - 1)

    def build(start: int | None, end: int, kind: str) -> AffectedRange:
        introduced = "0" if start is None else grid[start]
        low = -1 if start is None else start
        if kind == "open":
            return AffectedRange(introduced)
        # Ends strictly above (fixed) or at least at (last_affected) the start.
        top = max(end, low + 1) if kind == "fixed" else max(end, low, 0)
        top = min(top, len(grid) - 1)
        if kind == "fixed" and top <= low:
            return AffectedRange(introduced)
        if kind == "fixed":
            return AffectedRange(introduced, fixed=grid[top])
        return AffectedRange(introduced, last_affected=grid[top])

    return st.builds(build, st.none() | index, index, st.sampled_from(["fixed", "last", "open"]))


def _advisory(grid: list[str]) -> st.SearchStrategy[RangeAdvisory]:
    return st.builds(
        lambda spans, listed: RangeAdvisory("A-1", (), "s", tuple(spans), tuple(listed), (), ()),
        st.lists(_range(grid), max_size=4),
        st.lists(st.sampled_from(grid), max_size=3),
    )


def _affected(advisory: RangeAdvisory, version: str, ecosystem: str) -> bool:
    """Brute force through the runtime's own rule."""
    if any(version == v or _eq(version, v, ecosystem) for v in advisory.versions):
        return True
    return any(in_range(version, span, ecosystem) for span in advisory.affected)


def _eq(a: str, b: str, ecosystem: str) -> bool:
    from floorguard._maps import versions

    return versions.compare(a, b, ecosystem) == 0


def _check(old: RangeAdvisory, new: RangeAdvisory, ecosystem: str, samples: list[str]) -> None:
    gap = coverage.uncovered(coverage.of_advisory(old), coverage.of_advisory(new), ecosystem)
    lost = [v for v in samples if _affected(old, v, ecosystem) and not _affected(new, v, ecosystem)]
    assert (gap is None) == (not lost), (gap, lost)
    # The gap named is lost, all of it: the refusal names no version the new map affects.
    assert gap is None or all(
        v in lost for v in samples if coverage.contains([gap], v, ecosystem)
    ), (gap, lost)
    # The intervals say of each version what the runtime says.
    for version in samples:
        assert coverage.contains(coverage.of_advisory(old), version, ecosystem) == _affected(
            old, version, ecosystem
        )


@settings(max_examples=600)
@given(_advisory(PYPI_GRID), _advisory(PYPI_GRID))
def test_coverage_agrees_with_brute_force_in_pep440(old: RangeAdvisory, new: RangeAdvisory) -> None:
    _check(old, new, "PyPI", PYPI_SAMPLES)


@settings(max_examples=600)
@given(_advisory(NPM_GRID), _advisory(NPM_GRID))
def test_coverage_agrees_with_brute_force_in_semver(old: RangeAdvisory, new: RangeAdvisory) -> None:
    _check(old, new, "npm", NPM_SAMPLES)


@settings(max_examples=300)
@given(_advisory(PYPI_GRID))
def test_an_advisory_always_covers_itself_and_its_widening(old: RangeAdvisory) -> None:
    wider = RangeAdvisory(
        "A-1", (), "s", (*old.affected, AffectedRange("3")), (*old.versions, "7"), (), ()
    )
    assert coverage.uncovered(coverage.of_advisory(old), coverage.of_advisory(old), "PyPI") is None
    assert (
        coverage.uncovered(coverage.of_advisory(old), coverage.of_advisory(wider), "PyPI") is None
    )


def _adv(*spans: AffectedRange, versions: tuple[str, ...] = ()) -> Any:
    return coverage.of_advisory(RangeAdvisory("A-1", (), "s", spans, versions, (), ()))


@pytest.mark.parametrize(
    ("old", "new", "gap"),
    [
        # fixed lowered: 1.4.6 is no longer affected
        (_adv(AffectedRange("0", fixed="1.4.7")), _adv(AffectedRange("0", fixed="1.4.6")), True),
        # introduced raised
        (
            _adv(AffectedRange("1.0.0", fixed="2.0.0")),
            _adv(AffectedRange("1.0.1", fixed="2.0.0")),
            True,
        ),
        # last_affected -> fixed at the same version drops exactly that version
        (
            _adv(AffectedRange("0", last_affected="2.1.2")),
            _adv(AffectedRange("0", fixed="2.1.2")),
            True,
        ),
        # a listed version dropped
        (_adv(versions=("1.0.0", "1.1.0")), _adv(versions=("1.0.0",)), True),
        # an open range closed
        (_adv(AffectedRange("3.0.0")), _adv(AffectedRange("3.0.0", fixed="9.0.0")), True),
        # a gap between two ranges: 2.0.0 up to 2.0.1 is no longer affected
        (
            _adv(AffectedRange("1.0.0", fixed="3.0.0")),
            _adv(AffectedRange("1.0.0", fixed="2.0.0"), AffectedRange("2.0.1", fixed="3.0.0")),
            True,
        ),
        # widening, or the same versions stated another way, is no narrowing
        (_adv(AffectedRange("0", fixed="1.4.7")), _adv(AffectedRange("0", fixed="1.5.0")), False),
        (
            _adv(AffectedRange("1.0.0", fixed="3.0.0")),
            _adv(AffectedRange("1.0.0", fixed="2.0.0"), AffectedRange("2.0.0", fixed="3.0.0")),
            False,
        ),
        (
            _adv(AffectedRange("1.0.0", fixed="2.0.0"), versions=("2.0.0",)),
            _adv(AffectedRange("1.0.0", last_affected="2.0.0")),
            False,
        ),
        (_adv(versions=("1.5.0",)), _adv(AffectedRange("1.0.0", fixed="2.0.0")), False),
        (_adv(AffectedRange("0", fixed="1.0.0")), _adv(AffectedRange("0")), False),
    ],
)
def test_narrowing_cases(old: list[Interval], new: list[Interval], gap: bool) -> None:
    assert (coverage.uncovered(old, new, "npm") is not None) == gap


def test_the_gap_is_described_for_the_refusal() -> None:
    gap = coverage.uncovered(
        _adv(AffectedRange("0", last_affected="2.1.2")),
        _adv(AffectedRange("0", fixed="2.1.2")),
        "npm",
    )
    assert gap is not None and gap.describe() == "2.1.2"  # (only 2.1.2 is no longer affected)
