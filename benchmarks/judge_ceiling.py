"""The ceiling of the judge stage's routing and fusion: an *oracle* judge that answers from the truth.

    python benchmarks/judge_ceiling.py                          # /tmp/bench_full, confidence 0.9, reliability 0.8
    python benchmarks/judge_ceiling.py --bench-dir DIR --confidence 0.8 --reliability 0.5

This is not a result of any LLM. It runs the default cascade on the development benchmark at
``--bench-dir`` (``corpus/corpus.jsonl``, ``corpus/truth.json`` as ``semhash-llm bench`` writes
them) with a judge stage whose backend answers every routed pair with the benchmark's own
truth — ``confidence`` for a duplicate (same A–C group, or a containment pair), ``1 -
confidence`` otherwise — and whose calibration claims ``reliability``. It shows what the
routing (the verifier's uncertain pairs, least confident first, within ``max_fraction``) and
the log-odds fusion can give at most: a real judge lands between this row and ``--no-judge``
according to how often it is right.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from semhash_llm import PipelineConfig, deduplicate
from semhash_llm.bench.scorer import score
from semhash_llm.bench.truth import GroundTruth, duplicate_pair_test, read_corpus
from semhash_llm.judge.prompt import Verdict
from semhash_llm.stages import judge as judge_stage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench-dir", type=Path, default=Path("/tmp/bench_full"))
    parser.add_argument("--confidence", type=float, default=0.9, help="the oracle's probability for its answer")
    parser.add_argument("--reliability", type=float, default=0.8, help="the reliability its calibration claims")
    parser.add_argument("--max-fraction", type=float, default=0.03)
    args = parser.parse_args()
    truth = GroundTruth.read(args.bench_dir / "corpus" / "truth.json")
    records = read_corpus(args.bench_dir / "corpus" / "corpus.jsonl")
    first_id: dict[str, str] = {}
    for r in records:
        first_id.setdefault(str(r["text"]), str(r["id"]))
    is_duplicate = duplicate_pair_test(truth)

    class Oracle:
        backend = "oracle"
        model_id = "oracle"
        mode = "logprob"

        def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
            out = []
            for a, b in pairs:
                dup = is_duplicate(first_id[a], first_id[b])
                out.append(Verdict.from_probability(args.confidence if dup else 1.0 - args.confidence))
            return out

    judge_stage.make_judge = lambda config: Oracle()  # type: ignore[assignment,return-value]
    judge_stage.load_calibration = lambda *a: judge_stage.Calibration(reliability=args.reliability)  # type: ignore[assignment]
    rows = []
    for name, judge in (("--no-judge", {}), ("oracle judge", {"backend": "local", "use_cache": False,
                                                               "max_fraction": args.max_fraction})):
        cfg = PipelineConfig.from_dict({"judge": judge} if judge else {})
        res = deduplicate(records, cfg)  # type: ignore[arg-type]
        s = score(res.documents, truth)
        row = next((f for f in res.report["funnel"] if f["stage"] == "judge"), None)
        d = row["details"] if row else {}
        fams = ", ".join(f"{k} {100 * v:.2f}" for k, v in sorted(s.fdr_by_family.items()) if not k.startswith("role"))
        rows.append(f"| {name} | {100 * s.s_c:.1f} | {s.composite:.1f} | {100 * s.fdr:.2f} | {fams} | "
                    f"{d.get('pairs_judged', 0)} | {d.get('flipped_to_duplicate', 0)} / {d.get('flipped_to_distinct', 0)} |")
    print("| run | S_C | composite | FDR % | FDR % by family | pairs judged | flips to dup / distinct |")
    print("|---|---:|---:|---:|---|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
