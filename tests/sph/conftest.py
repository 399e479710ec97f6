from __future__ import annotations

import os

# Everything in these tests runs offline: no model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Small tensors: one thread avoids oversubscription on a shared 2-core machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")
