import sys

from gpubroker_cli.main import main

sys.exit(main())
