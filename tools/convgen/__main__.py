from convgen.cli import main

raise SystemExit(main())
