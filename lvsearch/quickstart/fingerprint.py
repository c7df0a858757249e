"""The quickstart report's fingerprint section: what a run's bit-reproducibility depends on
and hashes of its results (:func:`fingerprint_section`)."""

from __future__ import annotations

from pathlib import Path

from lvsearch.io import read_checked
from lvsearch.quickstart.files import QUICKSTART_AGAIN
from lvsearch.search.folder import TOPK, SearchFolder


def fingerprint_section(out: Path, names: dict[str, list[str]]) -> list[str]:
    """Markdown lines of the run's fingerprint: what its bit-reproducibility depends on
    (``environment.json``: versions, threads, device, native bf16) and hashes of its results
    (each arm's ``model.safetensors`` sha256, the EA and random-search top-k). A re-run of the
    same command in the same environment reproduces every line; with another thread count or
    precision the numbers agree only within tolerance (docs/results.md "Reliability")."""
    from lvsearch.io import sha256_file
    from lvsearch.modeldir import WEIGHTS
    from lvsearch.repro import BIT_RELEVANT, ENVIRONMENT, EnvironmentRecord

    lines = ["## Fingerprint (what reproduces this report bit for bit)\n"]
    env_path = out / ENVIRONMENT
    if env_path.is_file():
        rec = read_checked(env_path, EnvironmentRecord, what="environment record",
                           fix=f"delete {env_path} (the report then has no environment line; the next resume writes it "
                               "again), or restore it")
        started = rec.get("started") or {}
        lines.append("Environment at the start: " + ", ".join(f"{k} {started.get(k)}" for k in BIT_RELEVANT) + ".")
        if rec.get("resumes"):
            from lvsearch.repro import bit_differences

            changed = sorted({d for r in rec["resumes"] for d in bit_differences(started, r)})
            lines.append(f"Resumed {len(rec['resumes'])} time(s)"
                         + (f"; in another environment: {'; '.join(changed)} — the numbers then agree with an "
                            "uninterrupted run only within tolerance." if changed else ", always in the same environment."))
        lines.append("")
    lines += ["| arm | model.safetensors sha256 |", "|---|---|"]
    for arm in names:
        for n in names[arm]:
            f = out / "retrain" / n / "model" / WEIGHTS
            lines.append(f"| {n} | `{sha256_file(f)[:16]}` |" if f.is_file() else f"| {n} | missing |")
    lines.append("")
    for label, folder in (("EA", out / "search"), ("random search", out / "search" / "random")):
        search = SearchFolder(folder, regenerate=QUICKSTART_AGAIN)
        if (folder / TOPK).is_file():
            rec = search.topk_record()
            keys = [f"`{r['key']}` {r['fitness']:.4f}" for r in (rec.get("topk") or [])[:5]]
            lines.append(f"{label} top-{len(keys)} (of {len(rec.get('topk') or [])}, iteration {rec.get('iteration')}): "
                         + ", ".join(keys) + ".")
    lines.append("")
    return lines
