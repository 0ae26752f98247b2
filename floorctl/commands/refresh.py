"""``floorctl refresh``: regenerate the floor-map block from advisory feeds."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from floorctl import feeds, fetch, freshness, keys, trust, waivers
from floorctl import refresh as refreshing
from floorctl.commands import _progress
from floorctl.commands._feedopts import feed_options, reference_time
from floorctl.commands._files import refuse_outputs_in, refuse_shared_files
from floorctl.commands._output import emit_json, json_option, notice, report
from floorctl.commands._values import GivenPath, GivenSource, WholeNumber
from floorctl.errors import StaleModule
from floorctl.render_templates import is_template_path
from floorctl.splice import read_module_text
from floorguard._base._text import one_line
from floorguard._base._time import format_ts
from floorguard._crypto.trust import TrustedKeys
from floorguard._maps.map_model import Advisory

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from floorguard._chain.chain import AuditChain

DEFAULT_MODULE = Path("generated/floorguard/floor_map.py")
# From this many adapters on (all feeds together), a refresh on a terminal says what it does.
PROGRESS_ADAPTERS = 10_000
# A chosen map version leaves room for every later refresh to add one (map versions are
# JSON integers, exact up to 2**53 - 1, in the receipts and the record of maps written).
MAX_CHOSEN_VERSION = 2**31 - 1


def recorded_source(source: str) -> str:
    """How an input is named in the receipt: a URL or a relative path as given, an absolute
    path relative to the current folder, so that two checkouts of one commit in different
    folders sign the same predicate (the receipt must not name the build machine's paths).
    """
    if fetch.is_url(source) or not os.path.isabs(source):
        return source
    return os.path.relpath(source)


def _load(
    source: str,
    *,
    trusted: TrustedKeys | None,
    require_signed: bool,
    fetcher: fetch.Fetcher,
    cache_dir: Path,
    notify: fetch.Notify,
) -> tuple[feeds.Feed, fetch.FetchedFeed | None]:
    """A verified feed from a URL (with URL.dsse) or a file (with FEED.dsse beside it)."""
    if fetch.is_url(source):
        fetched = fetch.fetch_feed(
            source,
            trusted=trusted,
            require_signed=require_signed,
            limits=fetcher.limits,
            cache_dir=cache_dir,
            notify=notify,
            fetcher=fetcher,
        )
        return fetched.feed, fetched
    feed = fetch.read_local(
        Path(source), trusted=trusted, require_signed=require_signed, notify=notify
    )
    return dataclasses.replace(feed, source=recorded_source(source)), None


@click.command("refresh", short_help="Regenerate the floor map from advisory feeds.")
@click.option(
    "--feed",
    "sources",
    multiple=True,
    type=GivenSource(),
    metavar="SRC",
    help="An advisory feed (path or https URL). Repeat to merge several: the highest floor "
    "wins. Replaces the configured feeds.",
)
@click.option(
    "--module",
    type=GivenPath(path_type=Path, dir_okay=False),
    default=DEFAULT_MODULE,
    show_default=True,
    help="The module whose floor-map block is regenerated.",
)
@click.option(
    "--template",
    default=None,
    metavar="NAME|PATH",
    help="Block layout: floorguard, bernstein, or a template file.  [default: the "
    "module's own layout; floorguard for a module without a block]",
)
@click.option(
    "--write", is_flag=True, help="Rewrite the block (atomically). Without it nothing changes."
)
@click.option(
    "--check", is_flag=True, help="Exit 1 if the module is stale (for CI); writes nothing."
)
@click.option("--diff", "show_diff", is_flag=True, help="Print the module's unified diff.")
@click.option("--force", is_flag=True, help="Overwrite a block that was edited by hand.")
@click.option(
    "--allow-downgrade",
    is_flag=True,
    help="Accept lowering a floor or dropping an adapter (recorded in the receipt).",
)
@click.option(
    "--receipt-out",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Write the signed update receipt (DSSE envelope) here. Needs --write.",
)
@click.option(
    "--anchor", is_flag=True, help="Append the update receipt to the audit chain. Needs --write."
)
@click.option(
    "--waivers",
    "waivers_file",
    type=GivenPath(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="A waivers document: its waivers are written into the map (hashed, diffed and "
    "signed). Without it the map keeps no waivers. Expiry is judged at --now.",
)
@click.option(
    "--signing-key",
    type=GivenPath(path_type=Path, dir_okay=False),
    help="Private key for the receipt (default: $FLOORCTL_SIGNING_KEY, else the local "
    "development key, every use of which is announced on stderr).",
)
@click.option(
    "--map-version",
    type=WholeNumber(min=1, max=MAX_CHOSEN_VERSION),
    metavar="N",
    help="Number the new map N instead of one above the last (N must be above every "
    "version the module held, at most 2147483647): a map of your own must be above the "
    "built-in map's version for hosts to use it.",
)
@feed_options(
    now_help="Reference time for the feeds' and waivers' expiry (RFC 3339; default: the "
    "clock). Recorded in the update receipt."
)
@json_option
def command(
    sources: tuple[str, ...],
    module: Path,
    template: str | None,
    write: bool,
    check: bool,
    show_diff: bool,
    force: bool,
    allow_downgrade: bool,
    receipt_out: Path | None,
    anchor: bool,
    waivers_file: Path | None,
    signing_key: Path | None,
    map_version: int | None,
    trusted_keys: Path | None,
    require_signed: bool,
    state_file: Path | None,
    now_text: str | None,
    max_bytes: int,
    timeout: float,
    as_json: bool,
) -> None:
    """Merge advisory feeds and regenerate the floor map between its markers.

    Without --write this is a dry run that reports the data diff. Lowering a floor or
    dropping an adapter is refused unless --allow-downgrade. Exit 1 on any refusal.

    --feed, --module, --template, --trusted-keys, --waivers and --signing-key default to
    feeds, module, template, trusted-keys, waivers and signing-key in [tool.floorctl] of
    the nearest pyproject.toml from the current folder upward (or floorctl --config PATH),
    so that `floorctl refresh --check` needs no other flag; flags override it.
    """
    if not sources:
        raise click.UsageError(
            "no feed: pass --feed SRC, or set feeds in [tool.floorctl] of the nearest "
            "pyproject.toml (or floorctl --config PATH)"
        )
    if write and check:
        raise click.UsageError("--write and --check exclude each other")
    if (receipt_out or anchor) and not write:
        raise click.UsageError("--receipt-out and --anchor record a write: add --write")
    environ = dict(os.environ)
    state_path = state_file or freshness.default_path(environ)
    if write:
        local = [Path(source) for source in sources if not fetch.is_url(source)]
        refuse_shared_files(
            [("--receipt-out", receipt_out), ("--module", module), ("--state-file", state_path)],
            [
                *(("--feed", feed) for feed in local),
                *(
                    ("--feed (signature)", Path(f"{feed}{trust.SIGNATURE_SUFFIX}"))
                    for feed in local
                ),
                ("--waivers", waivers_file),
                ("--template", Path(template) if template and is_template_path(template) else None),
                (
                    "--signing-key",
                    keys.signing_key_path(signing_key, environ) if receipt_out else None,
                ),
                ("--trusted-keys", trusted_keys or trust.installed_path(environ)),
            ],
        )
        # What the refresh keeps beside the module by names of its own (not against the
        # module: a killed refresh's undo copy may be a hard link of it).
        refuse_shared_files(
            [("--receipt-out", receipt_out), ("--state-file", state_path)],
            [
                ("the refresh's journal", refreshing.journal_path(module)),
                ("the refresh's undo copy", refreshing.undo_path(module)),
                ("the refresh's lock", refreshing.lock_path(module)),
            ],
        )
        refuse_outputs_in(
            [("--receipt-out", receipt_out), ("--state-file", state_path)],
            module.parent / refreshing.ARCHIVE_DIR,
            "the maps that receipts name, each under its hash",
        )

    def notify(message: str) -> None:
        notice(f"floorctl: {message}")

    now, now_source = reference_time(now_text)
    trusted = trust.resolve_trusted_keys(trusted_keys, environ)
    if require_signed and trusted is None:
        raise click.UsageError(
            "--require-signed needs --trusted-keys (or keys installed by `floorctl trust rotate`)"
        )
    # One fetcher, so one --timeout deadline for every URL feed (and its URL.dsse) together.
    fetcher = fetch.Fetcher(
        fetch.Limits(max_bytes=max_bytes, timeout=timeout), progress=_progress.download()
    )
    cache_dir = keys.state_dir(environ) / fetch.CACHE_DIR
    results = [
        _load(
            source,
            trusted=trusted,
            require_signed=require_signed,
            fetcher=fetcher,
            cache_dir=cache_dir,
            notify=notify,
        )
        for source in sources
    ]
    loaded = [feed for feed, _ in results]
    waiver_document = None
    if waivers_file is not None:
        waiver_document = waivers.load_waivers(waivers_file)
        waiver_document = dataclasses.replace(
            waiver_document, source=recorded_source(waiver_document.source)
        )
    # Stage by stage on a terminal, for runs long enough to wonder about.
    show = None
    if sum(len(feed.floor_map) for feed in loaded) >= PROGRESS_ADAPTERS:
        show = _progress.stages("refresh")

    def decide(
        undone_version: int | None = None,
    ) -> tuple[refreshing.RefreshPlan, freshness.FreshnessState]:
        # Rollback, mix-and-match and expiry are refused before anything is planned or written.
        accepted = freshness.accept(freshness.load_state(state_path), loaded, now)
        made = refreshing.plan(
            loaded,
            module,
            read_module_text(module),
            template,
            force=force,
            allow_downgrade=allow_downgrade,
            # Nothing is written without --write: a downgrade is planned, its diff reported
            # and only then refused (below), as --check reports it stale.
            check=check or not write,
            reference_time=format_ts(now),
            reference_time_source=now_source,
            waiver_document=waiver_document,
            archived=functools.partial(refreshing.load_archived_map, module),
            holds_archive=functools.partial(refreshing.holds_archived_map, module),
            # (a killed refresh recorded the map it was writing: until --write recovers it,
            # the record is not what the module should hold)
            written=None
            if undone_version is None and refreshing.interrupted(module)
            else refreshing.read_written(module),
            progress=show,
            undone_version=undone_version,
            map_version=map_version,
        )
        # A template file is named in the receipt like the feeds are.
        return dataclasses.replace(made, template=recorded_source(made.template)), accepted

    outcome = None
    if not write:
        plan, _ = decide()
    else:

        def signer() -> Ed25519PrivateKey:
            return keys.resolve_signing_key(signing_key, environ, notify=notify).key

        def chain() -> AuditChain:
            from floorguard._chain.chain import AuditChain  # noqa: PLC0415  (only with --anchor)

            return AuditChain.from_env(environ)

        refreshing.require_module(module)
        refreshing.refuse_symlinked_module(module)
        # One writer per module, from reading the old block to the chain append: a second
        # refresh plans from the first one's map (or is refused as a downgrade), so no map
        # is lost and map versions keep increasing in the chain's order.
        # Refreshes of other modules share the feed state: it is locked from its reading to
        # its saving, or one refresh would save over what another accepted.
        remembers = any(feed.feed_id is not None for feed in loaded)
        with contextlib.ExitStack() as held:
            held.enter_context(refreshing.module_lock(module, notify=notify))
            if remembers:
                held.enter_context(freshness.state_lock(state_path, notify=notify))
            undone = refreshing.recover_interrupted(module, chain, notify=notify)
            plan, accepted = decide(undone)
            outcome = refreshing.apply(
                plan,
                receipt_out=receipt_out,
                signing_key=signer,
                chain=chain if anchor else None,
                progress=show,
            )
            # Remembered only once the module is written: a dry run accepts nothing.
            if remembers:
                freshness.save_state(state_path, accepted)
        for source, (_, fetched) in zip(sources, results, strict=True):
            if fetched is not None:
                fetch.remember(cache_dir, source, fetched)
    module_diff = (
        "".join(
            difflib.unified_diff(
                plan.old_text.splitlines(keepends=True),
                plan.new_text.splitlines(keepends=True),
                # (the module's name as every other line shows it: escaped, one line)
                fromfile=f"a/{one_line(str(module))}",
                tofile=f"b/{one_line(str(module))}",
            )
        )
        if show_diff
        else None
    )
    if as_json:
        # stdout holds one JSON document: the diff goes inside it, never after it.
        document = _document(plan, outcome, receipt_out)
        if module_diff is not None:
            document["module_diff"] = module_diff
        emit_json(document)
    else:
        _print_summary(plan, outcome, receipt_out, check)
        if module_diff is not None:
            click.echo(module_diff, nl=False)
    if not write and not check and plan.diff.is_downgrade and not allow_downgrade:
        raise refreshing.refused_downgrade(module, plan.diff, plan.baseline)
    if check and plan.stale:
        if plan.diff.is_downgrade and not allow_downgrade:
            raise StaleModule(
                f"{module}: stale: the floor map does not match the feeds, and the update "
                f"would be a downgrade (the new map {plan.diff.summary()}): it needs "
                "floorctl refresh --write --allow-downgrade"
            )
        if map_version is not None and plan.diff.empty:
            raise StaleModule(
                f"{module}: stale: the map's data matches the feeds, but it is numbered "
                f"{plan.old_version}, not --map-version {map_version} (run floorctl refresh "
                f"--write --map-version {map_version})"
            )
        raise StaleModule(
            f"{module}: stale: the floor map does not match the feeds "
            "(run floorctl refresh --write)"
        )
    if check and refreshing.interrupted(module):
        # The module may hold a map the chain never recorded, or one older than a map that
        # was in force: hosts that enforced that one refuse it, whatever the feeds say.
        raise StaleModule(
            f"{module}: stale: a refresh of it was interrupted ({refreshing.journal_path(module)}"
            " left): run floorctl refresh --write to recover it"
        )


def _document(
    plan: refreshing.RefreshPlan, outcome: refreshing.Outcome | None, receipt_out: Path | None
) -> dict[str, object]:
    return {
        "module": str(plan.module),
        "stale": plan.stale,
        "written": bool(outcome and outcome.written),
        "old_floor_map_hash": plan.old_hash,
        "new_floor_map_hash": plan.new_hash,
        "old_map_version": plan.old_version,
        "new_map_version": plan.new_version,
        "adapters": len(plan.new_map),
        "diff": plan.diff.to_json(),
        "downgrade": plan.diff.is_downgrade,
        "conflicts": [c.describe() for c in plan.conflicts],
        "receipt_id": outcome.receipt_id if outcome else None,
        "receipt_out": str(receipt_out) if outcome and receipt_out else None,
        "anchored_seq": outcome.anchored_seq if outcome else None,
    }


def _print_summary(
    plan: refreshing.RefreshPlan,
    outcome: refreshing.Outcome | None,
    receipt_out: Path | None,
    check: bool,
) -> None:
    echo = report
    for conflict in plan.conflicts:
        notice(f"floorctl: warning: {conflict.describe()}")
    echo(
        f"{plan.module}: {len(plan.new_map)} adapters, "
        f"map version {plan.old_version} -> {plan.new_version}"
    )
    changes = plan.diff
    for name in changes.added:
        echo(f"  + {name} {_describe_entry(plan.new_map[name])}")
    for change in changes.changed:
        was, now = (_shown(change[key]) for key in ("old", "new"))
        echo(f"  ~ {change['adapter']} {change['field']}: {was} -> {now}")
    for name in changes.removed:
        echo(f"  - {name}")
    for mark, kind, named in (
        ("+", "advisory", changes.advisories_added),
        ("~", "advisory", changes.advisories_changed),
        ("-", "advisory", changes.advisories_removed),
        ("+", "waiver", changes.waivers_added),
        ("~", "waiver", changes.waivers_changed),
        ("-", "waiver", changes.waivers_removed),
    ):
        for item in named:
            implies = "" if mark == "-" else _implied(plan.new_map, kind, item)
            echo(f"  {mark} {item['adapter']} {kind} {item['id']}{implies}")
    if changes.empty:
        echo("  no data change")
    if changes.is_downgrade:
        # With --allow-downgrade: what the receipt records as accepted; else only a --check.
        allowed = "allowed" if plan.downgrade_allowed else "needs --allow-downgrade"
        echo(f"  downgrade ({allowed}): {changes.summary()}")
    echo(f"  hash {plan.old_hash} -> {plan.new_hash}")
    if outcome is None:
        if not check:
            echo("dry run: nothing written (use --write)" if plan.stale else "up to date")
        return
    echo(
        f"wrote {plan.module}"
        if outcome.written
        else f"{plan.module} unchanged (already up to date)"
    )
    if receipt_out:
        echo(f"receipt {receipt_out} (receipt_id {outcome.receipt_id})")
    if outcome.anchored_seq is not None:
        echo(f"anchored in the audit chain at seq {outcome.anchored_seq}")


def _implied(new_map: Mapping[str, Advisory], kind: str, item: Mapping[str, str]) -> str:
    """What an added or changed advisory refuses, or a waiver lets run, in the new map: the
    verdicts the change implies, so a reviewer need not read the module diff for them."""
    entry = new_map.get(item["adapter"])
    if entry is None:
        return ""
    if kind == "advisory":
        for advisory in entry.advisories:
            if advisory.id == item["id"]:
                refused = [r.describe() for r in advisory.affected] + list(advisory.versions)
                return f": refuses {'; '.join(refused)}"
    else:
        for waiver in entry.waivers:
            if waiver.id == item["id"]:
                causes = ", ".join(waiver.advisories)
                return f": lets {waiver.version} run despite {causes} until {waiver.expires}"
    return ""


def _shown(value: object) -> str:
    return "(none)" if value is None else repr(value)


def _describe_entry(entry: Advisory) -> str:
    """An added adapter in one line: its floor, its ecosystem and how many advisories."""
    parts = []
    if entry.min_safe_version is not None:
        parts.append(f">= {entry.min_safe_version} ({entry.advisory_id})")
    if entry.extended:
        count = len(entry.advisories)
        parts.append(
            f"[{entry.ecosystem or 'PEP 440'}] {count} advisor{'y' if count == 1 else 'ies'}"
        )
    return " ".join(parts) or "(no floor, no advisories)"
