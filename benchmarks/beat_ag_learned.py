"""A learned, data-free post-processing of AG / ag_pool releases, SNH-style (issue 27, item 3).

Idea (Zeighami, Ahuja, Ghinita & Shahabi, "A Neural Database for Differentially Private Spatial
Range Queries", PVLDB 2022, arXiv 2108.01496): learn, on PUBLIC synthetic data, what the true
answers look like given a noisy release, then apply the learned map to a release of the private
data.  Here the map works on the fine grid: for every fine cell it predicts the true count from
features of the RELEASE ONLY, and queries are answered from the predicted field's prefix sums.

Training data (public)
    ``benchmarks/auto_generators.py`` (families clusters, roads, rings, patches, heavy, mixture,
    tracts, smooth), many seeds and n, mapped to a 256² unit grid, one release per instance and ε
    drawn with the library's mechanism (noise from ``dpcore.privacy.noise.NoiseSource`` only).  The
    target is the instance's realised fine-cell counts (the generators are public, so their truth is
    public).  The beat-AG training shapes (roads, single_tight, earthquakes, gauss_paper) and the
    held-out shapes (uber, many_small, tight_wide) are NOT generator families and never enter
    training or tuning.

Features per fine cell (all from the release and public inputs; densities in units of the mean
density ``mu = n̂ / cells``, n̂ the released noisy count)
    candidate fields F: the leaves' even spread ``D``; the piecewise-linear prior ``PL``
    (``dpcore.points.within_leaf``); ``D`` box-filtered over 3, 9, 27 and 81 cells; for ag_pool also
    AG's least-squares (pre-pooling) spread ``LS`` and its 9- and 27-cell box means; and the noise
    scale ``S`` = the leaf's SD / its area.  Gating inputs: asinh of every field, asinh of the
    leaf's SNR (count / SD), log leaf area, log n̂, and whether the leaf was pooled.

Models (one per ε and base mechanism)
    ``ridge``  pred = Σ_j a_j F_j + b S (a learned global linear filter; weighted ridge);
    ``mlp``    pred = Σ_j α_j(x) F_j + β(x) S, where α, β are the outputs of a small numpy MLP
               (2 × 32 tanh) of the gating inputs: a learned, locally adaptive filter.  Starts at PL.
    Loss: per-cell squared error in counts, weighted by Σ_s A_s / max(A_s·d_s, 20)² over the three
    query areas A_s (0.1 / 1 / 10 % of the grid) and the true density d_s box-averaged at that
    query's scale: the variance of a query's relative error (sanity bound 20) per unit cell variance.
    Then clamp at 0 and optionally rescale inside each leaf (``/leaf``), each first-level cell
    (``/L1``) or over the grid (``/n``) to keep the released mass.

Privacy
    The model's weights are a function of public synthetic data only.  Applying them reads only
    the release (leaves' rectangles, released counts and SDs, AG's released least-squares
    estimates, n̂) and public inputs (grid, ε), and draws no noise: a post-processing of an
    ε-DP release, hence ε-DP at the same cost (Dwork & Roth 2014, Prop. 2.1).  The true counts
    of the evaluated data are read only to SCORE (MRE), never by the model.

Evaluation: ``benchmarks/beat_ag_study.py``'s settings (training shapes by default; 256², n 10^4
and 10^5, ε 0.1 and 1), its workloads and noise seeds (``_hash("study", ...)`` per base mechanism),
MRE with sanity bound 20, sizes pooled; ratio to AG's MRE on the same workloads.

The results files were written by (summary: results/beat_ag_learned.md)

    PYTHONPATH=. nice -n 19 .venv/bin/python benchmarks/beat_ag_learned.py --seeds 10 --epochs 15 \
        --query-loss ''                                                      # beat_ag_learned.md (per cell)
    ... --bases ag_pool --cell-loss '' --q-seeds 4 --q-epochs 6 --out benchmarks/results/beat_ag_learned_query.md
    ... --bases ag_pool --epsilons 1 --cell-loss '' --query-loss qmlp --q-seeds 4 --q-epochs 8 --lr 3e-4 \
        --out benchmarks/results/beat_ag_learned_query_lr.md --models /tmp/models_lr
    ... --bases ag_pool --datasets uber,many_small,tight_wide --load 'ag_pool:0.1:qmlp=M/ag_pool_eps0.1_qmlp.npz;\
        ag_pool:0.1:qlin=M/ag_pool_eps0.1_qlin.npz;ag_pool:1:qmlp=M/ag_pool_eps1_qmlp_lr3e-4.npz;\
        ag_pool:1:qlin=M/ag_pool_eps1_qlin.npz' --out benchmarks/results/beat_ag_learned_heldout.md   # once

(M = benchmarks/results/beat_ag_learned_models; the per-cell run predates ``--query-loss`` and fitted only
the per-cell models, which is what ``--query-loss ''`` does now.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import auto_generators as gens  # noqa: E402
import numpy as np  # noqa: E402
from beat_ag_denoise import keep_mass_scaled, labels, score  # noqa: E402
from beat_ag_study import setting_args, settings  # noqa: E402
from scipy import ndimage  # noqa: E402
from spatial import SIZES, _hash  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.data import queries  # noqa: E402
from dpcore.data.domain import Bounds, Grid, aggregate_points  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.points.within_leaf import piecewise_linear  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

SIDE = 256
UNIT = Bounds(0.0, 0.0, 1.0, 1.0)
FAMS = (*gens.FAMILIES, *gens.LATER)
BOXES = (3, 9, 27, 81)
SMOOTH = 20.0


def release(mech_name: str, agg, eps: float, seed: int):
    mech = catalog.get("points", mech_name)
    plan = mech.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap))
    return mech.release(plan, agg, NoiseSource(seed)).inner


def features(rel, eps: float) -> tuple[np.ndarray, np.ndarray, float, dict[str, np.ndarray]]:
    """(fields F (cells, K) in units of mu, gating inputs G (cells, m), mu, label grids) of a release.
    Reads the release only (post-processing)."""
    shape = (rel.grid.rows, rel.grid.cols)
    cells = shape[0] * shape[1]
    n_hat = float(rel.public.get("noisy_point_count", max(rel.noisy[rel.level == 0].sum(), 1.0)))
    mu = max(n_hat, 100.0) / cells
    leaves = rel.leaf_index()
    r = rel.rects
    area = ((r[:, 1] - r[:, 0]) * (r[:, 3] - r[:, 2])).astype(float)
    D = rel.spread(rel.noisy, leaves) / mu
    PL = piecewise_linear(r[leaves], rel.noisy[leaves], shape) / mu
    S = rel.spread(rel.sd * 1.0, leaves) / mu  # sd per area
    fields = [D, PL] + [ndimage.uniform_filter(D, b, mode="nearest") for b in BOXES]
    ls = rel.details.get("least_squares")
    pooled = np.zeros(shape)
    if ls is not None:
        LS = rel.spread(ls[0], leaves) / mu
        fields += [LS, ndimage.uniform_filter(LS, 9, mode="nearest"), ndimage.uniform_filter(LS, 27, mode="nearest")]
        pooled = (np.abs(LS - D) > 1e-9).astype(float)
    else:
        fields += [D, fields[3], fields[4]]  # same layout for both bases
    F = np.stack([f.ravel() for f in fields] + [S.ravel()], axis=1)
    lab = labels(rel, leaves)
    snr = rel.noisy / np.maximum(rel.sd, 1e-9)
    la = np.log(area)
    G = np.concatenate([np.arcsinh(F), np.stack([
        np.arcsinh(snr)[lab].ravel(), la[lab].ravel(), np.full(cells, np.log(max(n_hat, 1.0))),
        pooled.ravel()], axis=1)], axis=1)
    tops = np.flatnonzero(rel.level == 0)
    return F, G, mu, {"leaf": lab, "L1": labels(rel, tops), "leaves": leaves, "tops": tops}


def weights(true: np.ndarray) -> np.ndarray:
    cells = true.size
    w = np.zeros(true.shape)
    for s in SIZES:
        A = s * cells
        side = max(1, int(round(np.sqrt(A))))
        d = ndimage.uniform_filter(true.astype(float), side, mode="constant")
        w += A / np.maximum(A * d, SMOOTH) ** 2
    return w.ravel()


# ---------------------------------------------------------------- the model (numpy)

class Model:
    """pred = Σ α_j(x) F_j (+ β S as the last field); α = A0 + MLP(G) (or constant for ridge)."""

    def __init__(self, kind: str, k: int, m: int, hidden: int = 32, seed: int = 0):
        self.kind, self.k = kind, k
        rng = np.random.default_rng(seed)
        self.a0 = np.zeros(k)
        self.a0[1] = 1.0  # start at PL
        self.gm, self.gs = np.zeros(m), np.ones(m)
        if kind == "mlp":
            self.W1 = rng.normal(0, 1 / np.sqrt(m), (m, hidden))
            self.b1 = np.zeros(hidden)
            self.W2 = rng.normal(0, 1 / np.sqrt(hidden), (hidden, hidden))
            self.b2 = np.zeros(hidden)
            self.W3 = np.zeros((hidden, k))
            self.b3 = np.zeros(k)

    def params(self):
        return [self.W1, self.b1, self.W2, self.b2, self.W3, self.b3] if self.kind == "mlp" else []

    def alpha(self, G: np.ndarray, cache: bool = False):
        if self.kind != "mlp":
            return np.broadcast_to(self.a0, (G.shape[0], self.k)), None
        x = (G - self.gm) / self.gs
        h1 = np.tanh(x @ self.W1 + self.b1)
        h2 = np.tanh(h1 @ self.W2 + self.b2)
        a = self.a0 + h2 @ self.W3 + self.b3
        return a, ((x, h1, h2) if cache else None)

    def predict(self, F: np.ndarray, G: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
        out = np.empty(F.shape[0])
        for i in range(0, F.shape[0], chunk):
            a, _ = self.alpha(G[i:i + chunk])
            out[i:i + chunk] = np.einsum("ij,ij->i", a, F[i:i + chunk])
        return out

    def fit_ridge(self, F, T, w, lam=1e-3):
        sw = w / w.mean()
        A = (F * sw[:, None]).T @ F
        b = (F * sw[:, None]).T @ T
        A += lam * np.trace(A) / A.shape[0] * np.eye(A.shape[0])
        self.a0 = np.linalg.solve(A, b)

    def fit_mlp(self, F, G, T, w, Fv, Gv, Tv, wv, epochs=20, batch=4096, lr=2e-3, log=print):
        self.gm, self.gs = G.mean(0), G.std(0) + 1e-6
        ps = self.params()
        mom = [np.zeros_like(p) for p in ps]
        vel = [np.zeros_like(p) for p in ps]
        t = 0
        rng = np.random.default_rng(1)
        wn = w / w.mean()
        best, best_ps = np.inf, [p.copy() for p in ps]

        def vloss():
            p = self.predict(Fv, Gv)
            return float(np.sum(wv * (p - Tv) ** 2) / np.sum(wv))
        base = vloss()
        log(f"    val loss at PL start {base:.4g}")
        for ep in range(epochs):
            order = rng.permutation(F.shape[0])
            for i in range(0, len(order), batch):
                idx = order[i:i + batch]
                a, (x, h1, h2) = self.alpha(G[idx], cache=True)
                f = F[idx]
                pred = np.einsum("ij,ij->i", a, f)
                g = 2 * wn[idx] * (pred - T[idx]) / len(idx)          # dL/dpred
                ga = g[:, None] * f                                    # dL/dα
                gW3, gb3 = h2.T @ ga, ga.sum(0)
                gh2 = (ga @ self.W3.T) * (1 - h2 ** 2)
                gW2, gb2 = h1.T @ gh2, gh2.sum(0)
                gh1 = (gh2 @ self.W2.T) * (1 - h1 ** 2)
                gW1, gb1 = x.T @ gh1, gh1.sum(0)
                t += 1
                for p, gp, m_, v_ in zip(ps, [gW1, gb1, gW2, gb2, gW3, gb3], mom, vel, strict=True):
                    m_ *= 0.9
                    m_ += 0.1 * gp
                    v_ *= 0.999
                    v_ += 0.001 * gp * gp
                    p -= lr * (m_ / (1 - 0.9 ** t)) / (np.sqrt(v_ / (1 - 0.999 ** t)) + 1e-8)
            vl = vloss()
            log(f"    epoch {ep + 1}: val loss {vl:.4g} ({vl / base:.3f} of PL)")
            if vl < best:
                best, best_ps = vl, [p.copy() for p in ps]
        for p, q in zip(ps, best_ps, strict=True):
            p[...] = q

    def fit_queries(self, train: list, val: list, epochs: int = 8, n_q: int = 200, lr: float = 1e-3,
                    log=print, tag: str = "") -> None:
        """SNH-style: train on query answers.  ``train``/``val``: lists of (F, G, mu, true grid) of
        whole releases; per step one release, ``n_q`` random rectangles of each size, loss = the MRE
        itself (|error| / max(true, 20), sizes pooled), its gradient scattered back to the fine cells
        through the rectangles (a 2-D difference array).  ``kind`` "mlp": the gates' MLP is trained;
        otherwise the constant mix ``a0``."""
        if self.kind == "mlp":
            G0 = np.concatenate([g for _, g, _, _ in train[:50]])
            self.gm, self.gs = G0.mean(0), G0.std(0) + 1e-6
        ps = self.params() if self.kind == "mlp" else [self.a0]
        mom = [np.zeros_like(p) for p in ps]
        vel = [np.zeros_like(p) for p in ps]
        rng = np.random.default_rng(7)
        grid = Grid(UNIT, SIDE, SIDE)
        vq = [queries.random_rectangles(grid, SIZES, n_q, shape="random", seed=_hash("learn-val-q", i))[0]
              for i in range(len(val))]

        def answers(field, qs):
            P = np.zeros((field.shape[0] + 1, field.shape[1] + 1))
            P[1:, 1:] = field.cumsum(0).cumsum(1)
            return P[qs[:, 1], qs[:, 3]] - P[qs[:, 0], qs[:, 3]] - P[qs[:, 1], qs[:, 2]] + P[qs[:, 0], qs[:, 2]]

        def vloss():
            tot = 0.0
            for (F, G, mu, true), qs in zip(val, vq, strict=True):
                f = np.maximum(self.predict(F, G), 0).reshape(true.shape) * mu
                t = answers(true, qs)
                tot += np.mean(np.abs(answers(f, qs) - t) / np.maximum(t, SMOOTH))
            return 100 * tot / len(val)
        base = vloss()
        log(f"    {tag} val MRE at the PL start {base:.3f}")
        best, best_ps, t = base, [p.copy() for p in ps], 0
        for ep in range(epochs):
            for j in rng.permutation(len(train)):
                F, G, mu, true = train[j]
                qs = queries.random_rectangles(grid, SIZES, n_q, shape="random", seed=int(rng.integers(1 << 31)))[0]
                if self.kind == "mlp":
                    x = (G - self.gm) / self.gs
                    h1 = np.tanh(x @ self.W1 + self.b1)
                    h2 = np.tanh(h1 @ self.W2 + self.b2)
                    a = self.a0 + h2 @ self.W3 + self.b3
                else:
                    a = self.a0[None, :]
                raw = np.einsum("ij,ij->i", np.broadcast_to(a, F.shape), F)
                pos = raw > 0
                f = (np.where(pos, raw, 0.0) * mu).reshape(true.shape)
                tq = answers(true, qs)
                e = answers(f, qs) - tq
                g = np.sign(e) / np.maximum(tq, SMOOTH) / len(qs) * 100
                Dl = np.zeros((true.shape[0] + 1, true.shape[1] + 1))
                np.add.at(Dl, (qs[:, 0], qs[:, 2]), g)
                np.add.at(Dl, (qs[:, 0], qs[:, 3]), -g)
                np.add.at(Dl, (qs[:, 1], qs[:, 2]), -g)
                np.add.at(Dl, (qs[:, 1], qs[:, 3]), g)
                gc = Dl.cumsum(0).cumsum(1)[:-1, :-1].ravel() * mu * pos
                ga = gc[:, None] * F
                if self.kind == "mlp":
                    gW3, gb3 = h2.T @ ga, ga.sum(0)
                    gh2 = (ga @ self.W3.T) * (1 - h2 ** 2)
                    gW2, gb2 = h1.T @ gh2, gh2.sum(0)
                    gh1 = (gh2 @ self.W2.T) * (1 - h1 ** 2)
                    gW1, gb1 = x.T @ gh1, gh1.sum(0)
                    grads = [gW1, gb1, gW2, gb2, gW3, gb3]
                else:
                    grads = [ga.sum(0)]
                t += 1
                for p, gp, m_, v_ in zip(ps, grads, mom, vel, strict=True):
                    m_ *= 0.9
                    m_ += 0.1 * gp
                    v_ *= 0.999
                    v_ += 0.001 * gp * gp
                    p -= lr * (m_ / (1 - 0.9 ** t)) / (np.sqrt(v_ / (1 - 0.999 ** t)) + 1e-8)
            vl = vloss()
            log(f"    {tag} epoch {ep + 1}: val MRE {vl:.3f} ({vl / base:.3f} of PL)")
            if vl < best:
                best, best_ps = vl, [p.copy() for p in ps]
        for p, q in zip(ps, best_ps, strict=True):
            p[...] = q

    @classmethod
    def load(cls, path: Path) -> Model:
        z = np.load(path)
        mlp = "arr_0" in z
        m = cls("mlp" if mlp else "lin", z["a0"].size, z["gm"].size, hidden=z["arr_0"].shape[1] if mlp else 1)
        m.a0, m.gm, m.gs = z["a0"], z["gm"], z["gs"]
        if mlp:
            m.W1, m.b1, m.W2, m.b2, m.W3, m.b3 = (z[f"arr_{i}"] for i in range(6))
        return m

    def save(self, path: Path):
        np.savez(path, *self.params(), a0=self.a0, gm=self.gm, gs=self.gs)


# ---------------------------------------------------------------- training data

def training_rows(base: str, eps: float, instances: list[tuple[str, int, int]], per_release: int, log=print):
    Fs, Gs, Ts, Ws = [], [], [], []
    grid = Grid(UNIT, SIDE, SIDE)
    t0 = time.time()
    for j, (fam, n, seed) in enumerate(instances):
        x, y = gens.points(fam, n, _hash("learn-data", fam, n, seed))
        agg = aggregate_points(x, y, grid)
        rel = release(base, agg, eps, _hash("learn-noise", base, fam, n, seed, eps))
        F, G, mu, _ = features(rel, eps)
        true = agg.counts.astype(float)
        w = weights(true) * mu * mu  # loss in counts, model in units of mu
        rng = np.random.default_rng(_hash("learn-sample", fam, n, seed))
        idx = rng.choice(F.shape[0], per_release, replace=False)
        Fs.append(F[idx]); Gs.append(G[idx]); Ts.append(true.ravel()[idx] / mu); Ws.append(w[idx])  # noqa: E702
        if j % 50 == 0:
            log(f"  {base} ε={eps:g}: {j}/{len(instances)} releases ({time.time() - t0:.0f} s)")
    return np.concatenate(Fs), np.concatenate(Gs), np.concatenate(Ts), np.concatenate(Ws)


def training_releases(base: str, eps: float, insts: list[tuple[str, int, int]], log=print) -> list:
    """Whole releases (float32 features) for :meth:`Model.fit_queries`."""
    grid = Grid(UNIT, SIDE, SIDE)
    out = []
    for fam, n, seed in insts:
        x, y = gens.points(fam, n, _hash("learn-data", fam, n, seed))
        agg = aggregate_points(x, y, grid)
        rel = release(base, agg, eps, _hash("learn-noise", base, fam, n, seed, eps))
        F, G, mu, _ = features(rel, eps)
        out.append((F.astype(np.float32), G.astype(np.float32), mu, agg.counts.astype(float)))
    log(f"  {base} ε={eps:g}: {len(out)} whole releases")
    return out


def instances(seeds: int, ns: list[int], offset: int = 0) -> list[tuple[str, int, int]]:
    return [(f, n, s) for f in FAMS for n in ns for s in range(offset, offset + seeds)]


# ---------------------------------------------------------------- evaluation

def apply(model: Model, rel, eps: float) -> dict[str, np.ndarray]:
    F, G, mu, lab = features(rel, eps)
    shape = (rel.grid.rows, rel.grid.cols)
    pred = np.maximum(model.predict(F, G), 0.0).reshape(shape) * mu
    D = F[:, 0].reshape(shape) * mu
    out = {"": pred}
    out["/leaf"] = keep_mass_scaled(pred, lab["leaf"], np.bincount(lab["leaf"].ravel(), D.ravel(),
                                                                    minlength=lab["leaf"].max() + 1), D)
    l1 = lab["L1"]
    out["/L1"] = keep_mass_scaled(pred, l1, np.bincount(l1.ravel(), D.ravel(), minlength=l1.max() + 1), D)
    s = pred.sum()
    n_hat = mu * shape[0] * shape[1]
    out["/n"] = pred * (n_hat / s) if s > 0 else pred
    return out


def evaluate(a, models: dict[tuple[str, float, str], Model], bases: list[str], log=print):
    rows = []
    for ds, n, grid, agg, eps in settings(a):
        tag = f"{ds}:{n}"
        acc: dict[str, float] = {}
        for r in range(a.releases):
            qs, tags = queries.random_rectangles(grid, SIZES, 1000, shape="random", seed=_hash("workload", 256, 256, r))
            true = queries.true_answers(agg.counts, qs)
            for name in ["ag", *[b for b in bases if b != "ag"]]:
                mech = catalog.get("points", name)
                plan = mech.plan(agg.grid, eps, {}, unit=points_unit(agg.user_cap))
                rel = mech.release(plan, agg, NoiseSource(_hash("study", tag, eps, name, r))).inner
                fields = {name: rel.density(),
                          f"{name} pl/leaf*": piecewise_linear(rel.rects[rel.leaf_index()],
                                                               rel.noisy[rel.leaf_index()], rel.density().shape)}
                if name in bases:
                    for kind in ("ridge", "mlp", "qlin", "qmlp"):
                        m = models.get((name, eps, kind))
                        if m is None:
                            continue
                        for post, f in apply(m, rel, eps).items():
                            fields[f"{name} {kind}{post}"] = f
                for k, f in fields.items():
                    acc[k] = acc.get(k, 0.0) + score(f, qs, tags, true) / a.releases
        rows.append((ds, n, eps, acc))
        log(f"{ds} {n} {eps:g} AG {acc['ag']:.2f} " + " ".join(f"{k}={v / acc['ag']:.3f}" for k, v in acc.items()
                                                                  if k != "ag"))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = setting_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), 3, "beat_ag_learned.md")
    ap.add_argument("--bases", default="ag_pool,ag")
    ap.add_argument("--seeds", type=int, default=10, help="instances per generator family and n")
    ap.add_argument("--train-ns", default="3000,10000,30000,100000,300000")
    ap.add_argument("--per-release", type=int, default=3000, help="fine cells sampled per training release")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--cell-loss", default="ridge,mlp", help="per-cell models to fit ('' for none)")
    ap.add_argument("--query-loss", default="qlin,qmlp", help="query-trained models to fit ('' for none)")
    ap.add_argument("--q-seeds", type=int, default=5, help="whole releases per family and n for the query loss")
    ap.add_argument("--q-epochs", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam step of the query-trained models")
    ap.add_argument("--load", default="", help="evaluate saved models (base:eps:kind=path.npz;...) without training")
    ap.add_argument("--models", default=str(ROOT / "benchmarks" / "results" / "beat_ag_learned_models"))
    a = ap.parse_args(argv)
    bases = a.bases.split(",")
    ns = [int(x) for x in a.train_ns.split(",")]
    eps_list = [float(x) for x in a.epsilons.split(",")]
    logs: list[str] = []

    def log(s: str) -> None:
        logs.append(s)
        print(s, flush=True)
    models: dict[tuple[str, float, str], Model] = {}
    Path(a.models).mkdir(parents=True, exist_ok=True)
    cell_kinds = [k for k in a.cell_loss.split(",") if k]
    q_kinds = [k for k in a.query_loss.split(",") if k]
    for spec in filter(None, a.load.split(";")):
        key, path = spec.split("=")
        b, e, k = key.split(":")
        models[(b, float(e), k)] = Model.load(Path(path))
        log(f"  loaded {key} from {path}")
    for base in bases if not a.load else []:
        for eps in eps_list:
            if q_kinds:
                trq = training_releases(base, eps, instances(a.q_seeds, ns, offset=20_000), log)
                vaq = training_releases(base, eps, instances(1, ns, offset=30_000), log)
                for kind in q_kinds:
                    m = Model("mlp" if kind == "qmlp" else "lin", trq[0][0].shape[1], trq[0][1].shape[1],
                              hidden=a.hidden)
                    t0 = time.time()
                    m.fit_queries(trq, vaq, epochs=a.q_epochs, lr=a.lr, log=log, tag=f"{base} ε={eps:g} {kind}")
                    log(f"    {kind}: {time.time() - t0:.0f} s; mix {np.round(m.a0, 3).tolist()}")
                    models[(base, eps, kind)] = m
                    m.save(Path(a.models) / f"{base}_eps{eps:g}_{kind}.npz")
                del trq, vaq
            if not cell_kinds:
                continue
            tr = instances(a.seeds, ns)
            va = instances(max(1, a.seeds // 5), ns, offset=10_000)
            F, G, T, W = training_rows(base, eps, tr, a.per_release, log)
            Fv, Gv, Tv, Wv = training_rows(base, eps, va, a.per_release, log)
            log(f"  {base} ε={eps:g}: {F.shape[0]:,} training rows, {Fv.shape[0]:,} validation rows")
            ridge = Model("ridge", F.shape[1], G.shape[1])
            if "mlp" not in cell_kinds:
                ridge.fit_ridge(F, T, W)
                models[(base, eps, "ridge")] = ridge
                continue
            ridge.fit_ridge(F, T, W)
            vr = float(np.sum(Wv * (ridge.predict(Fv, Gv) - Tv) ** 2) / Wv.sum())
            log(f"    ridge: coefficients {np.round(ridge.a0, 3).tolist()}; val loss {vr:.4g}")
            mlp = Model("mlp", F.shape[1], G.shape[1], hidden=a.hidden)
            mlp.fit_mlp(F, G, T, W, Fv, Gv, Tv, Wv, epochs=a.epochs, log=log)
            models[(base, eps, "ridge")], models[(base, eps, "mlp")] = ridge, mlp
            mlp.save(Path(a.models) / f"{base}_eps{eps:g}_mlp.npz")
            ridge.save(Path(a.models) / f"{base}_eps{eps:g}_ridge.npz")
    rows = evaluate(a, models, bases, log)
    names = list(rows[0][3])
    lines = [f"# {__doc__.splitlines()[0]}", "",
             f"- Command: `benchmarks/beat_ag_learned.py --datasets {a.datasets} --bases {a.bases} --seeds {a.seeds} "
             f"--train-ns {a.train_ns} --per-release {a.per_release} --epochs {a.epochs} --cell-loss '{a.cell_loss}' "
             f"--query-loss '{a.query_loss}' --q-seeds {a.q_seeds} --q-epochs {a.q_epochs} --hidden {a.hidden} --lr {a.lr:g} "
             f"--load '{a.load}' --releases {a.releases}`; "
             "256², MRE (sizes 0.1/1/10 % pooled, sanity bound 20) over AG's, same workloads and noise seeds as "
             "`beat_ag_study.py`.", "",
             "| variant | ε | geometric mean ratio | worst ratio |", "|---|---:|---:|---:|"]
    for eps in sorted({r[2] for r in rows}):
        for k in names:
            v = [r[3][k] / r[3]["ag"] for r in rows if r[2] == eps]
            lines.append(f"| {k} | {eps:g} | {np.exp(np.mean(np.log(v))):.3f} | {max(v):.3f} |")
    lines += ["", "Per setting (ratio to AG):", "", "| dataset | n | ε | AG MRE | " + " | ".join(names[1:]) + " |",
              "|---|---:|---:|---:|" + "---:|" * (len(names) - 1)]
    for ds, n, eps, acc in rows:
        lines.append(f"| {ds} | {n:,} | {eps:g} | {acc['ag']:.1f} | "
                     + " | ".join(f"{acc[k] / acc['ag']:.3f}" for k in names[1:]) + " |")
    lines += ["", "Training log:", "", "```", *logs, "```"]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:6 + 2 * len(names)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
