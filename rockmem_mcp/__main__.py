import sys

from rockmem_mcp.cli import main

sys.exit(main())
