"""Tests of lvsearch.scaling (estimators M1-M4, bootstrap, successive halving) and its CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _shared import REPO, load_scaling_curve
from lvsearch.cli import main
from lvsearch.errors import LvsearchError
from lvsearch.scaling import (
    M1,
    M2,
    M3,
    M4,
    extrapolation_rmse,
    halving_step,
    make_estimator,
    prediction_interval,
    smooth_curve,
    successive_halving,
)


def m4_curve(x, beta, c, alpha, eps_inf, eps0):
    """Ground truth of M4 (Eq. 4) by bisection, independent of the estimator's root finder."""
    f = beta * np.asarray(x, float) ** c
    b = eps0 - eps_inf
    lo, hi = np.zeros_like(f), np.full_like(f, b)
    for _ in range(200):
        mid = (lo + hi) / 2
        up = mid - f * (b - mid) ** alpha > 0
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    return eps_inf + (lo + hi) / 2


X = np.geomspace(1e6, 1e9, 40)
FIT, TEST = slice(0, 26), slice(26, None)


# -- recovery of known parameters ----------------------------------------------------------
def test_m1_recovers_power_law():
    y = 3.0 * X**-0.2
    p = M1().fit(X, y)
    assert p["beta"] == pytest.approx(3.0, rel=1e-6)
    assert p["c"] == pytest.approx(-0.2, abs=1e-8)


def test_m2_recovers_parameters():
    y = 0.3 + 40.0 * X**-0.3
    m = M2()
    p = m.fit(X[FIT], y[FIT])
    assert p["eps_inf"] == pytest.approx(0.3, abs=1e-3)
    assert p["c"] == pytest.approx(-0.3, abs=5e-3)
    assert extrapolation_rmse(m, X[TEST], y[TEST]) < 1e-3


def test_m3_recovers_parameters():
    beta, c, gamma = 2.0, -0.4, 1e-7
    y = beta * (1 / X + gamma) ** (-c)
    m = M3()
    p = m.fit(X[FIT], y[FIT])
    assert p["c"] == pytest.approx(c, abs=1e-3)
    assert p["gamma"] == pytest.approx(gamma, rel=1e-2)
    assert extrapolation_rmse(m, X[TEST], y[TEST]) < 1e-4


@pytest.mark.parametrize("fit_eps0, tol", [(False, 1.0), (True, 5.0)])
def test_m4_recovers_m4_parameters(fit_eps0, tol):
    # with eps_0 fitted too, (eps_inf, eps_0, alpha) trade off a little: looser tolerances
    truth = dict(beta=50.0, c=-0.35, alpha=0.6, eps_inf=0.2, eps0=1.0)
    y = m4_curve(X, **truth)
    m = M4(eps0=1.0, fit_eps0=fit_eps0)
    p = m.fit(X[FIT], y[FIT])
    assert p["eps_inf"] == pytest.approx(0.2, abs=2e-3 * tol)
    assert p["c"] == pytest.approx(-0.35, abs=0.01 * tol)
    if not fit_eps0:  # alpha is only identified once eps_0 is pinned
        assert p["alpha"] == pytest.approx(0.6, abs=0.05)
    err = extrapolation_rmse(m, X[TEST], y[TEST])
    assert err < 1e-3 * tol
    # and it beats the simpler laws on its own data
    for simpler in (M1(), M2(), M3()):
        simpler.fit(X[FIT], y[FIT])
        assert err < extrapolation_rmse(simpler, X[TEST], y[TEST])


def test_m4_with_alpha_zero_data_matches_m2():
    y = 0.25 + 20.0 * X**-0.3
    m4, m2 = M4(eps0=1.0, fit_eps0=False), M2()
    m4.fit(X[FIT], y[FIT])
    m2.fit(X[FIT], y[FIT])
    assert m4.params_["alpha"] < 0.05
    np.testing.assert_allclose(m4.predict(X[TEST]), m2.predict(X[TEST]), rtol=2e-3)
    # alpha fixed to 0 *is* M2
    m4a = M4(alpha=0.0)
    m4a.fit(X[FIT], y[FIT])
    np.testing.assert_allclose(m4a.predict(X), m2.predict(X), rtol=1e-8)


@pytest.mark.parametrize("name", ["M1", "M2", "M3", "M4"])
def test_predictions_invariant_to_x_scale(name):
    rng = np.random.default_rng(1)
    y = m4_curve(X, 50.0, -0.35, 0.6, 0.2, 1.0) * np.exp(rng.normal(0, 0.003, X.size))
    preds = []
    for scale in (1.0, 1e-6, 1e3):
        m = make_estimator(name, eps0=1.0)
        m.fit(X[FIT] * scale, y[FIT])
        preds.append(m.predict(X[TEST] * scale))
    np.testing.assert_allclose(preds[1], preds[0], rtol=1e-4)
    np.testing.assert_allclose(preds[2], preds[0], rtol=1e-4)


def test_predict_scalar_and_large_x_are_finite():
    y = m4_curve(X, 50.0, -0.35, 0.6, 0.2, 1.0)
    m = M4(eps0=1.0)
    m.fit(X, y)
    v = m.predict(1e30)
    assert v.shape == () and 0.2 - 1e-3 < float(v) < float(m.predict(X[-1]))


# -- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "x, y, match",
    [
        ([1, 2, 3], [1.0, 0.9, 0.8], "at least"),  # M4 needs 5 points with eps_0 fitted
        ([1, 2, 3, 4, 5, 6], [1.0, 0.9, 0.0, 0.7, 0.6, 0.5], "> 0"),
        ([1, 2, 3, 4, 5, 6], [1.0, 0.9, np.nan, 0.7, 0.6, 0.5], "finite"),
        ([1, 3, 2, 4, 5, 6], [1.0, 0.9, 0.8, 0.7, 0.6, 0.5], "strictly increasing"),
        ([1, 2, 2, 4, 5, 6], [1.0, 0.9, 0.8, 0.7, 0.6, 0.5], "strictly increasing"),
    ],
)
def test_bad_curves_raise_lvsearch_error(x, y, match):
    with pytest.raises(LvsearchError, match=match):
        M4().fit(x, y)


def test_eps0_not_above_losses_raises():
    y = 0.3 + 5 * X[:10] ** -0.2
    with pytest.raises(LvsearchError, match="eps0"):
        M4(eps0=float(y.max())).fit(X[:10], y)
    with pytest.raises(LvsearchError, match="eps0"):
        M4(fit_eps0=False).fit(X[:10], y)


def test_predict_before_fit_raises():
    with pytest.raises(LvsearchError, match="before fit"):
        M2().predict([1.0])


# -- smoothing -----------------------------------------------------------------------------
def test_moving_average_smoothing_unpins_eps_inf_from_a_low_outlier():
    y = 0.3 + 40.0 * X[FIT] ** -0.3
    y_noisy = y.copy()
    y_noisy[-3] *= 0.95  # one noisy low point: below the true eps_inf of 0.3
    plain = M2().fit(X[FIT], y_noisy)
    smoothed = M2(smooth="moving-average", window=5).fit(X[FIT], y_noisy)
    assert plain["eps_inf"] < y_noisy.min()  # pinned below the outlier
    assert abs(smoothed["eps_inf"] - 0.3) < abs(plain["eps_inf"] - 0.3)
    assert np.all(np.diff(smooth_curve(y_noisy, "running-min")) <= 0)


# -- the paper's benchmark curves ----------------------------------------------------------
REAL = [
    # (domain, task, model, M4 RMSE threshold); measured 0.0117, 0.0007, 0.0075 (select="validate")
    ("NMT", "log_perplexity", "6 Enc, 6 Dec", 0.02),
    ("LM", "val_loss", "4.53e+08", 0.002),
    ("IC", "inet_5", "MiX/B/16", 0.015),
]


@pytest.mark.parametrize("domain, task, model, threshold", REAL)
def test_m4_extrapolates_real_curves(domain, task, model, threshold):
    curve = load_scaling_curve(domain, task, model)
    if curve is None:
        pytest.skip("shared data not found (<repo>/../shared/data or $LVSEARCH_SHARED_DATA)")
    xtr, ytr, xte, yte = curve
    assert len(xte) >= 1
    m4 = M4(eps0=1.0 if max(ytr) < 1.0 else None)
    m4.fit(xtr, ytr)
    err = extrapolation_rmse(m4, xte, yte)
    assert err < threshold
    m1 = M1()
    m1.fit(xtr, ytr)
    assert err < extrapolation_rmse(m1, xte, yte) / 2


def test_validated_eps_inf_beats_training_loss_choice_on_a_real_curve():
    # c_10 BiT/101/3: the training loss falls monotonically as eps_inf -> 0, so choosing eps_inf by
    # training loss ("nearest") gives eps_inf = 0 and extrapolates at ~0.095; choosing it by
    # extrapolation to the held-out tail ("validate") keeps an interior eps_inf (~0.18, ~0.058).
    curve = load_scaling_curve("IC", "c_10", "BiT/101/3")
    if curve is None:
        pytest.skip("shared data not found (<repo>/../shared/data or $LVSEARCH_SHARED_DATA)")
    xtr, ytr, xte, yte = curve
    val, near = M4(eps0=1.0), M4(eps0=1.0, select="nearest")
    val.fit(xtr, ytr)
    near.fit(xtr, ytr)
    assert near.params_["eps_inf"] < 0.01
    assert 0.1 < val.params_["eps_inf"] < min(ytr)
    assert val.info_["eps_inf_select"] == "validate" and val.info_["val_points"] >= 1
    assert extrapolation_rmse(val, xte, yte) < 0.75 * extrapolation_rmse(near, xte, yte)


def test_validation_tail_is_the_last_factor_of_two_and_short_curves_fall_back():
    y = m4_curve(X, 50.0, -0.35, 0.6, 0.2, 1.0)
    m = M4(eps0=1.0)
    m.fit(X[FIT], y[FIT])
    assert m.info_["val_points"] == int(np.sum(X[FIT] > X[FIT][-1] / 2))
    m3 = M3(val_ratio=4.0)
    m3.fit(X[FIT], y[FIT])
    assert m3.info_["gamma_select"] == "validate"
    assert m3.info_["val_points"] == int(np.sum(X[FIT] > X[FIT][-1] / 4))
    short = M4(eps0=1.0)  # 6 points: M4 needs 5 + 2 to hold out a tail
    short.fit(X[:6], y[:6])
    assert short.info_["eps_inf_select"] == "nearest"
    assert any("validation tail" in n for n in short.info_["notes"])
    with pytest.raises(LvsearchError, match="val_ratio"):
        M2(val_ratio=1.0).fit(X[FIT], y[FIT])
    with pytest.raises(LvsearchError, match="select"):
        M4(select="best").fit(X[FIT], y[FIT])


def test_fitted_eps0_stays_below_the_random_guess_loss():
    y = m4_curve(X, 50.0, -0.35, 0.6, 0.2, 1.0)
    for select in ("validate", "nearest"):
        p = M4(eps0=0.999, select=select).fit(X[FIT], y[FIT])
        assert y[FIT].max() < p["eps0"] <= 0.999


def test_make_estimator_shares_one_option_set():
    opts = {"eps0": 1.0, "fit_eps0": True, "select": "nearest", "val_ratio": 3.0}
    assert make_estimator("M3", **opts).select == "global"  # M3 has no "nearest"
    assert make_estimator("M2", **opts).select == "nearest"
    assert make_estimator("m4", **opts).val_ratio == 3.0
    assert make_estimator("M1", **opts).name == "M1"
    assert make_estimator("M3").select == make_estimator("M4").select == "validate"


# -- bootstrap and successive halving ------------------------------------------------------
def test_prediction_interval_brackets_the_point_prediction():
    rng = np.random.default_rng(0)
    x = X[:20]
    y = (0.3 + 40.0 * x**-0.3) * np.exp(rng.normal(0, 0.01, x.size))
    pi = prediction_interval(lambda: M2(), x, y, [1e9, 1e10], n_boot=30, seed=3)
    assert pi["n_ok"] + pi["n_failed"] == 30 and pi["n_ok"] >= 25
    assert np.all(pi["lo"] <= pi["pred"]) and np.all(pi["pred"] <= pi["hi"])
    assert np.all(pi["hi"] - pi["lo"] > 0)
    assert np.all(pi["hi"][1] - pi["lo"][1] >= pi["hi"][0] - pi["lo"][0])  # wider further out
    again = prediction_interval(lambda: M2(), x, y, [1e9, 1e10], n_boot=30, seed=3)
    np.testing.assert_array_equal(again["lo"], pi["lo"])


def test_degenerate_bootstrap_refit_of_a_short_curve_does_not_crash():
    # A real retrain dev-loss curve (5 points after the warm-up, 4 parameters): one residual
    # resample drove M4 to c ~ -120, alpha ~ 1100, whose public beta overflowed a float.
    x = [73728.0, 86016.0, 98304.0, 110592.0, 122880.0]
    y = [6.902883775099874, 6.886238066061291, 6.86017312835103, 6.8483151627549415, 6.826950496740959]
    pi = prediction_interval(lambda: M4(eps0=math.log(4096), fit_eps0=False), x, y, [491520.0], n_boot=50, seed=2)
    assert np.isfinite(pi["pred"]).all() and pi["lo"][0] <= pi["pred"][0] <= pi["hi"][0]
    assert pi["n_ok"] + pi["n_failed"] == 50


def crossing_curves():
    """Four candidates; 'slow' is worst early but best at the full budget."""
    x = np.geomspace(1e6, 1e9, 31)
    rng = np.random.default_rng(7)
    params = {  # (beta, c, alpha, eps_inf)
        "fast": (3.0, -0.25, 0.3, 0.55),
        "mid": (6.0, -0.28, 0.3, 0.50),
        "also": (4.0, -0.22, 0.3, 0.52),
        "slow": (2e5, -0.80, 0.3, 0.30),
    }
    curves = {}
    for name, (b, c, a, ei) in params.items():
        y = m4_curve(x, b, c, a, ei, 2.0) * np.exp(rng.normal(0, 0.002, x.size))
        curves[name] = (x, y)
    return curves


def test_halving_with_m4_keeps_the_late_winner_that_current_loss_drops():
    curves = crossing_curves()
    final = {n: y[-1] for n, (x, y) in curves.items()}
    winner = min(final, key=final.get)
    assert winner == "slow"
    rung = 1e7  # observed so far: x <= 1e7 of a 1e9 budget
    early = {n: (x[x <= rung], y[x <= rung]) for n, (x, y) in curves.items()}
    assert max(early, key=lambda n: early[n][1][-1]) == "slow"  # worst by current loss

    factory = lambda: M4(eps0=2.0, fit_eps0=False, scan_eps0=False)  # noqa: E731
    cur = halving_step(early, full_budget=1e9, eta=2, rule="current")
    ext = halving_step(early, full_budget=1e9, eta=2, rule="m4", model_factory=factory, n_boot=20)
    assert "slow" in cur["cut"]
    assert "slow" in ext["kept"]
    assert ext["candidates"]["slow"]["decision"] == "kept"
    assert "cut-off" in cur["candidates"]["slow"]["reason"]
    assert ext["ranking"][0] == "slow"
    assert len(ext["cut"]) >= 1  # it still prunes

    sim = successive_halving(curves, rungs=[1e7, 3e7], full_budget=1e9, eta=2, rule="m4",
                             model_factory=factory, n_boot=20)
    assert "slow" in sim["survivors"] and len(sim["rungs"]) >= 1
    sim_cur = successive_halving(curves, rungs=[1e7, 3e7], full_budget=1e9, eta=2, rule="current")
    assert "slow" not in sim_cur["survivors"]
    json.dumps(sim, default=float)  # the decision log is serialisable


def test_halving_falls_back_to_current_loss_for_short_curves():
    curves = crossing_curves()
    short = {n: (x[:3], y[:3]) for n, (x, y) in curves.items()}
    log = halving_step(short, full_budget=1e9, eta=2, rule="m4", n_boot=5)
    assert all(e["scored_by"].startswith("current (fallback") for e in log["candidates"].values())
    assert len(log["kept"]) == 2


def test_halving_ranks_everyone_by_current_loss_when_one_curve_cannot_be_fitted():
    curves = crossing_curves()
    mixed = {n: (x[x <= 1e7], y[x <= 1e7]) for n, (x, y) in curves.items()}
    mixed["mid"] = (mixed["mid"][0][:2], mixed["mid"][1][:2])  # too short for M4
    log = halving_step(mixed, full_budget=1e9, eta=2, rule="m4", n_boot=5)
    assert log["fallback"] is not None and "'mid'" in log["fallback"]
    assert {e["score"] for e in log["candidates"].values()} == {e["last_loss"] for e in log["candidates"].values()}
    assert all(e["scored_by"].startswith("current (fallback") for e in log["candidates"].values())
    assert len(log["kept"]) == 2  # no interval keeps in the fallback
    assert halving_step(mixed, full_budget=1e9, eta=2, rule="current")["fallback"] is None


def test_successive_halving_counts_compute():
    curves = crossing_curves()
    sim = successive_halving(curves, rungs=[1e7, 3e7], full_budget=1e9, eta=2, rule="current")
    cut1, cut2 = sim["rungs"][0]["cut"], sim["rungs"][1]["cut"]
    assert (len(cut1), len(cut2), len(sim["survivors"])) == (2, 1, 1)
    assert sim["compute"] == pytest.approx(2 * 1e7 + 1 * 3e7 + 1e9)
    assert sim["compute_all"] == 4 * 1e9
    assert {sim["trained"][n] for n in cut1} == {1e7}


def test_halving_rejects_bad_arguments():
    with pytest.raises(LvsearchError):
        halving_step({}, full_budget=1.0)
    with pytest.raises(LvsearchError, match="rule"):
        halving_step(crossing_curves(), full_budget=1e9, rule="best")
    with pytest.raises(LvsearchError, match="rungs"):
        successive_halving(crossing_curves(), rungs=[3e7, 1e7])


# -- CLI -----------------------------------------------------------------------------------
def write_jsonl(path: Path, x, y, ykey="loss"):
    with open(path, "w") as f:
        for a, b in zip(x, y):
            f.write(json.dumps({"tokens": float(a), ykey: float(b), "step": 1}) + "\n")
    return path


@pytest.fixture
def good_jsonl(tmp_path):
    x = X[::2]
    return write_jsonl(tmp_path / "curve.jsonl", x, m4_curve(x, 50.0, -0.35, 0.6, 0.2, 1.0))


def test_cli_fit_prints_tables_and_plot(good_jsonl, tmp_path, capsys):
    png = tmp_path / "fit.png"
    rc = main(["scaling", "fit", str(good_jsonl), "--models", "M1,M4", "--predict-at", "1e10",
               "--plot", str(png), "--eps0", "1.0"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "M4" in out and "holdout RMSE" in out and "1e+10" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "content, name, args, match",
    [
        (None, "missing.jsonl", [], "not found"),
        ("", "empty.csv", [], "empty"),
        ("tokens,loss\n1,0.9\n2,abc\n3,0.7\n", "nonnum.csv", [], "not a finite number"),
        ("tokens,loss\n1,0.9\n3,0.8\n2,0.7\n4,0.6\n", "unsorted.csv", [], "strictly increasing"),
        ('{"tokens": 1, "dev_mlm_loss": 2}\n', "keys.jsonl", [], "available keys: dev_mlm_loss, tokens"),
        ("step,loss\n1,0.9\n2,0.8\n", "cols.csv", [], "available columns: step, loss"),
        ("tokens,loss\n1,0.9\n2,0.8\n3,0.7\n4,0.6\n", "short.csv", [], "lower --holdout-frac"),
        ("tokens,loss\n1,0.9\n2,0.8\n3,0.7\n4,0.6\n5,0.5\n6,0.45\n", "eps0.csv",
         ["--holdout-frac", "0", "--eps0", "0.5"], "--eps0"),
    ],
)
def test_cli_bad_inputs_exit_2_with_message(tmp_path, capsys, content, name, args, match):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    rc = main(["scaling", "fit", str(path), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert match in err and str(path) in err
    assert "Traceback" not in err


def test_cli_subprocess_bad_file_exits_2(tmp_path):
    path = tmp_path / "unsorted.csv"
    path.write_text("tokens,loss\n1,0.9\n3,0.8\n2,0.7\n")
    proc = subprocess.run([sys.executable, "-m", "lvsearch", "scaling", "fit", str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "strictly increasing" in proc.stderr and "sort the file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_m4_degenerate_parameters_raise_arithmetic_error_not_runtime_error():
    """A degenerate bootstrap refit (NaN β) must count as a failed fit (ArithmeticError, which
    prediction_interval and halving_step handle), never crash with brentq's RuntimeError —
    seen in a real quickstart run."""
    from lvsearch.scaling import M4

    p = {"log_beta": float("nan"), "c": -0.5, "alpha": 0.5, "eps0": 8.3, "eps_inf": 1.0}
    with pytest.raises(ArithmeticError):
        M4._predict_p(p, np.array([1.0, 2.0]))


def test_degenerate_fit_never_cuts():
    """A finalist was cut on a zero-width M4 interval although its current loss was
    the lowest. A fit whose every bootstrap refit gives one prediction falls back to
    current-loss ranking."""
    from lvsearch.scaling import Estimator

    class Pinned(Estimator):  # every fit predicts the same loss whatever the data: degenerate
        name = "pinned"
        n_params = 1

        def fit(self, x, y):
            self.params_ = {"c": 6.687}
            return self.params_

        def predict(self, x):
            return np.full(np.shape(np.atleast_1d(x)), 6.687)

    curves = {"low-now": ([1, 2, 3, 4], [7.0, 6.5, 6.2, 6.0]), "high-now": ([1, 2, 3, 4], [7.5, 7.2, 7.0, 6.9])}
    log = halving_step(curves, full_budget=100, eta=2, rule="m4", model_factory=Pinned, n_boot=10)
    assert log["fallback"] and "degenerate" in log["fallback"] and "zero-width" in log["fallback"]
    assert log["kept"] == ["low-now"] and log["cut"] == ["high-now"]  # ranked by current loss


def test_scaling_fit_warns_on_a_rising_curve(tmp_path, capsys):
    """A fresh user's pass: a rising loss curve was fitted and extrapolated without a word."""
    from lvsearch.cli import main

    curve = tmp_path / "rise.csv"
    curve.write_text("x,y\n" + "".join(f"{i},{1 + 0.1 * i * i}\n" for i in range(1, 9)))
    assert main(["scaling", "fit", str(curve), "--x", "x", "--y", "y", "--models", "M1"]) == 0
    assert "rises over the fitted points" in " ".join(capsys.readouterr().err.split())
    falling = tmp_path / "fall.csv"
    falling.write_text("x,y\n" + "".join(f"{i},{5 / i + 1}\n" for i in range(1, 9)))
    assert main(["scaling", "fit", str(falling), "--x", "x", "--y", "y", "--models", "M1"]) == 0
    assert "rises" not in capsys.readouterr().err
