"""``python -m tilelang.lsp``: the language server."""

import sys

from tilelang.lsp import main

sys.exit(main())
