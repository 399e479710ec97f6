"""``python -m semhash_llm`` runs the ``semhash-llm`` command."""

from __future__ import annotations

import sys

from semhash_llm.cli import main

sys.exit(main())
