"""``floorctl --help`` as click writes it at its widest: 78 columns, for a terminal of 80 or
more and for output that is not a terminal. Kept so that a lone --help is answered without
importing click and the CLI (floorctl.launch); tests/cli/test_top_help.py holds it to what
click writes, and says how to renew it when the CLI's options or commands change."""

TOP_HELP = """\
Usage: floorctl [OPTIONS] COMMAND [ARGS]...

  Maintain, sign and verify adapter security floors.

  A floor is the minimum safe version of an agent CLI (aider, claude, codex,
  ...). floorctl turns advisory feeds into the floor map that floorguard
  enforces at spawn time, and signs a receipt for every change so that it can
  be checked offline.

  Defaults for init, refresh, fetch, validate, publish, sign, build and chain
  come from [tool.floorctl] of the nearest pyproject.toml from the current
  folder upward (the nearest one, with or without that table), or of --config
  PATH; its paths are relative to that file's folder; flags override it.

Options:
  -V, --version  Print floorctl's version and the floorguard version it runs
                 with, and exit.
  --config PATH  Read [tool.floorctl] from PATH instead of the nearest
                 pyproject.toml.
  -h, --help     Show this message and exit.

Commands:
  build     Build the floorguard wheel, sdist and provenance.
  canary    Record canary runs; show last-green versions.
  chain     Export chain slices; sign checkpoints; prove records.
  doctor    Judge every tracked adapter on PATH by the map.
  fetch     Download a feed, verify it, then write it.
  import    Turn OSV advisories into a feed.
  init      Start a new floor-map module holding an empty map.
  keygen    Create an Ed25519 signing key pair.
  publish   Publish the floor map, signed, for hosts.
  refresh   Regenerate the floor map from advisory feeds.
  sign      Write FILE.dsse, a signature over FILE's bytes.
  trust     Manage the keys trusted to sign feeds.
  validate  Check feeds and waivers documents.
  verify    Verify receipts and audit-chain slices offline.
  witness   Cosign checkpoints as a witness of the log.
"""
