"""The neural verifier (MGFN, contrastive boundary, Monte Carlo dropout); needs the ``ml`` extra (torch)."""
