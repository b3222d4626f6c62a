from oxconsole.cli import main

raise SystemExit(main())
