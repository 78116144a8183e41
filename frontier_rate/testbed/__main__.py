from frontier_rate.testbed.cli import main

raise SystemExit(main())
