from lvsearch.cli import main

raise SystemExit(main())
