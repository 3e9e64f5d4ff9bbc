"""convtune: the tuning lab on top of the convgen suite. It measures configs (`convgen tune`),
keeps what it measured (tracked text under tuning/data/, a local SQLite store built from it),
learns a config selector from it, and answers a run's "which config?" through
`convtune.picker`, which convgen finds at run time. convgen never imports this package."""
