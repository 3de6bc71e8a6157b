from collsim.cli import main

raise SystemExit(main())
