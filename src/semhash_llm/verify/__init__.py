"""The neural verifier (MGFN, pair features, contrastive boundary, Monte Carlo dropout); needs the ``ml`` extra (torch)."""
