"""The weights shipped in the package load offline (numpy + tokenizers only) and behave.

Quantitative checks on texts written here (no data files): near-duplicate paragraphs get codes
within the default radius, unrelated paragraphs do not, and paraphrases with few shared words are
closer than unrelated sentences. Each check is also run on a broken student (its vocabulary rows
shuffled: a model that knows no meaning), which must fail it, so the bounds can fail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from semhash_llm.sph import (
    ASSETS_DIR,
    SPH,
    SPHConfig,
    SPHHasher,
    StaticStudent,
    hamming_distance,
    load_hasher,
    load_student,
)

LEARNED_RADIUS = 8  # the learned hyperplanes at 64 bits: the radius their code bounds were measured at

TEXTS = [
    "The city council approved the new budget for public schools on Tuesday evening.",
    "On Tuesday evening the city council approved the new budget for public schools.",
    "the city council approved the new budget for public schools on tuesday evening",
    "Heavy rain flooded several streets near the river after the storm.",
    "A recipe for chocolate cake needs flour, sugar, eggs and cocoa powder.",
]


PARAGRAPHS = [
    # 1 astronomy
    "Astronomers using a large radio telescope in Chile have detected a faint signal from a galaxy that formed "
    "less than a billion years after the Big Bang. The light left the galaxy when the universe was young, and it "
    "has been stretched by the expansion of space into long wavelengths. By measuring the shift of a carbon line, "
    "the team estimated the distance and found that the galaxy was already producing stars at a surprising rate. "
    "The researchers say that dust must have formed quickly in the early universe, and they plan further "
    "observations with a space observatory to study its chemistry.",
    # 2 cooking
    "To make the bread, dissolve the yeast in a cup of warm water with a spoonful of sugar and wait until the "
    "mixture begins to foam. Add the flour and a pinch of salt, then knead the dough on a floured table for ten "
    "minutes until it is smooth and elastic. Place it in an oiled bowl, cover it with a towel and let it rise in "
    "a warm corner of the kitchen for about an hour. Shape the loaf, brush it with beaten egg and bake it in a "
    "hot oven until the crust is golden and the bottom sounds hollow.",
    # 3 football
    "The home side needed a late goal to rescue a point after a disappointing first half in which the visitors "
    "controlled possession and hit the post twice. The manager made three substitutions at the interval, and the "
    "change of shape gave his wingers more space on the flanks. With five minutes left, a low cross from the right "
    "was turned in at the near post by the young striker, who celebrated in front of the supporters. The draw "
    "keeps the club in fourth place, two points behind their rivals, with four matches of the season remaining.",
    # 4 tax law
    "Under the new rules, small businesses with an annual turnover below the threshold may choose to account for "
    "value added tax on a cash basis rather than on invoices issued. This means that tax is paid to the authority "
    "only when customers actually settle their bills, which can ease pressure on working capital. Firms must keep "
    "records of every payment received and made, and they must file a return each quarter. Penalties apply to "
    "late filing, although the agency has said that it will waive fines for a first mistake if the business "
    "corrects the error promptly.",
    # 5 medicine
    "The patient, a woman in her sixties, arrived at the emergency department with chest pain that had started "
    "while she was climbing stairs. An electrocardiogram showed changes consistent with reduced blood flow to the "
    "heart, and blood tests revealed raised levels of a cardiac enzyme. She was given aspirin and a drug to thin "
    "the blood before being taken to the catheter laboratory, where doctors found a narrowed coronary artery. A "
    "stent was inserted to open the vessel, and she was discharged three days later with advice on diet and "
    "exercise.",
    # 6 gardening
    "Tomatoes grow best in a sunny, sheltered spot with rich, well drained soil. Sow the seeds indoors in early "
    "spring and move the young plants outside once the risk of frost has passed. Tall varieties need a stake or "
    "a cane for support, and the side shoots that appear between the leaves and the main stem should be pinched "
    "out regularly. Water the plants deeply and evenly, since irregular watering causes the fruit to split, and "
    "feed them every week with a potash fertiliser once the first flowers have set.",
    # 7 software
    "The latest release of the database fixes a bug that could corrupt an index when two transactions updated "
    "the same row at the same time. Administrators are advised to upgrade as soon as possible and to rebuild any "
    "index that reports errors during the consistency check. The update also improves the query planner, which "
    "now chooses a hash join for large tables when memory allows, and it adds an option to compress the "
    "write-ahead log. Configuration files from the previous version remain compatible, and no changes to client "
    "applications are required.",
    # 8 history
    "In the spring of 1848 a wave of revolutions swept across Europe, beginning in Sicily and spreading to "
    "France, the German states and the Austrian Empire. Students, workers and members of the middle class "
    "demanded constitutions, freedom of the press and an end to the old feudal privileges. In Paris the king "
    "abdicated and a republic was proclaimed, while in Vienna the powerful chancellor fled the city. Within two "
    "years, however, most of the uprisings had been suppressed by the armies of the conservative monarchies, and "
    "many of the liberal leaders went into exile.",
    # 9 finance markets
    "Shares fell sharply on Wednesday after the central bank signalled that interest rates would stay higher "
    "for longer than investors had expected. Technology stocks led the decline, with several large companies "
    "losing more than four percent, while the yield on ten-year government bonds rose to its highest level in "
    "months. The dollar strengthened against most major currencies, and the price of gold slipped. Analysts said "
    "that markets had been too optimistic about rate cuts and that volatility was likely to continue until the "
    "next inflation report.",
    # 10 wildlife
    "Each autumn thousands of salmon return from the ocean to the river where they hatched, swimming against the "
    "current and leaping over rocks and small waterfalls to reach their spawning grounds. Bears gather along the "
    "banks to catch the fish, and eagles feed on the remains. After laying and fertilising their eggs in the "
    "gravel of the stream bed, the adult salmon die, and their bodies release nutrients that nourish the forest "
    "around the river. Biologists have found traces of ocean nitrogen in trees growing hundreds of metres from "
    "the water.",
    # 11 travel
    "The night train leaves the capital shortly after nine and arrives at the coast early the next morning. "
    "Passengers can choose between seats, shared couchettes with six berths and private sleeping cabins with a "
    "washbasin. A dining car serves simple meals until midnight, and breakfast is brought to the cabins before "
    "arrival. Tickets are cheapest when booked two months in advance, and travellers with a rail pass pay only a "
    "small supplement for a berth. In summer the service runs every day, but in winter it operates only on "
    "weekends.",
    # 12 music
    "The orchestra opened the concert with a short overture before the soloist joined them for the violin "
    "concerto, which she played from memory. Her tone in the slow movement was warm and intimate, and the "
    "conductor kept the accompaniment light so that every phrase could be heard. After the interval the "
    "orchestra performed a symphony by a Czech composer, full of folk melodies and dance rhythms. The audience "
    "demanded two encores, and the soloist returned to the stage to play a movement from a sonata by Bach.",
]

# Paraphrases with few shared content words, and the same sentences give unrelated pairs across rows.
PARAPHRASES = [
    ("The physician examined the sick child.", "A doctor checked the ill kid."),
    ("The automobile would not start this morning.", "My car refused to turn on today at dawn."),
    ("She purchased a new house near the coast.", "She bought a fresh home by the seaside."),
    ("The company fired hundreds of workers.", "The firm laid off many employees."),
    ("The film was extremely boring.", "That movie was really dull."),
    ("He is studying chemistry at university.", "He takes college courses in chemical science."),
    ("Heavy rain caused flooding in the town.", "Storms and downpours flooded the village."),
    ("The price of petrol went up again.", "Fuel costs rose once more."),
    ("The student forgot her homework.", "The pupil did not remember her assignment."),
    ("The president gave a speech on television.", "The head of state addressed the nation on TV."),
    ("The team won the championship.", "The squad took the title."),
    ("Our flight was delayed by three hours.", "The plane left three hours late."),
    ("The kitten is sleeping on the sofa.", "A young cat naps on the couch."),
    ("The police arrested the thief.", "Officers caught the robber."),
    ("I am very hungry.", "I am starving."),
    ("The lecture was hard to understand.", "The talk was difficult to follow."),
]


def _edit(text: str, rng: np.random.Generator, k: int) -> str:
    """``k`` word edits: drop a word, replace it with a word of another paragraph, or swap two neighbours."""
    words = text.split()
    pool = " ".join(PARAGRAPHS).split()
    for _ in range(k):
        op, i = int(rng.integers(3)), int(rng.integers(len(words)))
        if op == 0:
            del words[i]
        elif op == 1:
            words[i] = str(rng.choice(pool))
        else:
            j = min(i + 1, len(words) - 1)
            words[i], words[j] = words[j], words[i]
    return " ".join(words)


@dataclass
class Scores:
    near_within: float  # near-duplicate pairs (3-5 edits in ~95 words) within the radius
    near_mean: float
    unrelated_within: float  # pairs of paragraphs on different topics within the radius
    unrelated_mean: float
    paraphrase_auc: float  # P(cos(a, its paraphrase) > cos(a, another pair's sentence))
    paraphrase_top1: float  # share of sentences whose paraphrase is their nearest of the others
    paraphrase_gap: float  # mean cos of paraphrases - mean cos of the other pairs


def _scores(student: StaticStudent, hasher: SPHHasher, radius: int) -> Scores:
    rng = np.random.default_rng(0)
    base = [p for p in PARAGRAPHS for _ in range(10)]
    views = [_edit(p, rng, int(rng.integers(3, 6))) for p in base]
    near = hamming_distance(hasher.codes(student.encode(base)), hasher.codes(student.encode(views)))
    codes = hasher.codes(student.encode(PARAGRAPHS))
    a, b = np.triu_indices(len(PARAGRAPHS), 1)
    unrelated = hamming_distance(codes[a], codes[b])
    ea = student.encode([x for x, _ in PARAPHRASES])
    eb = student.encode([y for _, y in PARAPHRASES])
    cos = ea @ eb.T
    m = len(PARAPHRASES)
    diag, off = np.diag(cos), cos[~np.eye(m, dtype=bool)].reshape(m, m - 1)
    return Scores(
        near_within=float((near <= radius).mean()),
        near_mean=float(near.mean()),
        unrelated_within=float((unrelated <= radius).mean()),
        unrelated_mean=float(unrelated.mean()),
        paraphrase_auc=float((diag[:, None] > off).mean()),
        paraphrase_top1=float((diag[:, None] > off).all(axis=1).mean()),
        paraphrase_gap=float(diag.mean() - off.mean()),
    )


def _code_bounds_hold(s: Scores, bits: int) -> bool:
    return (
        s.near_within >= 0.95
        and s.unrelated_within <= 0.1
        and s.unrelated_mean >= 3 * s.near_mean
        and s.unrelated_mean >= 0.2 * bits
    )


def _meaning_bounds_hold(s: Scores) -> bool:
    return s.paraphrase_auc >= 0.9 and s.paraphrase_top1 >= 0.75 and s.paraphrase_gap >= 0.3


def _broken(student: StaticStudent) -> StaticStudent:
    rows = np.random.default_rng(1).permutation(len(student.embeddings))
    return StaticStudent(student.tokenizer, student.embeddings[rows], student.max_tokens)


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_near_duplicates_fall_within_the_radius_and_unrelated_texts_do_not(bits: int) -> None:
    radius = round(LEARNED_RADIUS * bits / 64)  # radius 8 at 64 bits, the same cosine at other K
    student, hasher = load_student(), load_hasher(None, bits)
    s = _scores(student, hasher, radius)
    assert _code_bounds_hold(s, bits), s
    assert s.near_within > 10 * max(s.unrelated_within, 0.01), s
    # A student that knows no meaning fails the same bounds (here: unrelated texts share codes).
    assert not _code_bounds_hold(_scores(_broken(student), hasher, radius), bits)


def test_paraphrases_are_closer_than_unrelated_sentences() -> None:
    student = load_student()
    s = _scores(student, load_hasher(None, 64), LEARNED_RADIUS)
    assert _meaning_bounds_hold(s), s
    assert not _meaning_bounds_hold(_scores(_broken(student), load_hasher(None, 64), LEARNED_RADIUS))


def test_shipped_assets_are_small_and_complete() -> None:
    files = [p for p in ASSETS_DIR.rglob("*") if p.is_file()]
    names = {p.relative_to(ASSETS_DIR).as_posix() for p in files}
    assert {"student/student.json", "student/embeddings.npz", "student/tokenizer.json", "MODEL_CARD.md",
            "train_report.json", "hyperplanes_k32.npz", "hyperplanes_k64.npz", "hyperplanes_k128.npz"} <= names
    assert sum(p.stat().st_size for p in files) <= 10 * 1024 * 1024
    card = (ASSETS_DIR / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "p_tea(j|i)" in card and "KL only" in card and "MSE only" in card
    report = json.loads((ASSETS_DIR / "train_report.json").read_text(encoding="utf-8"))
    assert report["scores"]["student_variants"]


def test_shipped_student_loads_offline() -> None:
    student = load_student()
    emb = student.encode(TEXTS)
    assert emb.shape == (5, student.dim) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-4)
    cos = emb @ emb.T
    assert cos[0, 1] > 0.95 and cos[0, 2] > 0.95  # reorder / case: same content
    assert cos[0, 1] > cos[0, 3] and cos[0, 1] > cos[0, 4]


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_shipped_hyperplanes_and_codes(bits: int) -> None:
    hasher = load_hasher(None, bits)
    assert hasher.bits == bits and hasher.dim == load_student().dim
    sph = SPH(SPHConfig(bits=bits, num_chunks=4))
    codes = sph.codes(TEXTS)
    assert codes.dtype == np.uint64
    assert codes.shape == ((5,) if bits <= 64 else (5, bits // 64))
    d = hamming_distance(codes[[0, 0]], codes[[2, 4]])
    assert d[0] < d[1]


def test_sph_candidates_find_the_copies() -> None:
    sph = SPH()
    cands = sph.candidates(TEXTS)
    pairs = set(zip(cands.a.tolist(), cands.b.tolist()))
    assert (0, 2) in pairs
    assert not any(4 in p for p in pairs)
    assert cands.proposed_by == "sph"


def test_mismatched_bits_are_refused() -> None:
    with pytest.raises(ValueError, match="bits"):
        SPH(SPHConfig(bits=64), hasher=load_hasher(None, 32))
