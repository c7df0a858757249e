"""The quickstart report's figures: the arms' architectures as strips of slots and the retraining
curves (PNGs written with :func:`lvsearch.io.save_figure`)."""

from __future__ import annotations

from pathlib import Path


def plot_arch_strips(archs: dict[str, object], path: Path) -> None:
    """One row per arm: slots as boxes coloured by op (each op's ``OpSpec.colour``,
    :mod:`lvsearch.ops`) and labelled with the op and, below it, the slot's variant in compact
    form (``h2``, ``i0.5``, ``k3``; :func:`lvsearch.arch.variant_suffix`), arcs for every input
    other than the previous slot (ELC connectivity). The legend lists the ops the rows use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Arc, Patch, Rectangle

    from lvsearch import ops as op_registry
    from lvsearch.arch import variant_suffix
    from lvsearch.io import save_figure

    rows = list(archs.items())
    used = {op for _, a in rows for op in a.ops}
    colours = {code: spec.colour for code, spec in op_registry.specs().items() if code in used}
    n = max(a.num_slots for _, a in rows)
    fig, ax = plt.subplots(figsize=(1.2 + 0.75 * (n + 1), 0.3 + 1.25 * len(rows)))
    for r, (label, arch) in enumerate(rows):
        y = (len(rows) - 1 - r) * 1.25
        ax.add_patch(Rectangle((0, y), 0.8, 0.5, facecolor="#DDDDDD", edgecolor="black"))
        ax.text(0.4, y + 0.25, "emb", ha="center", va="center", fontsize=7)
        for s, (op, inputs, variant) in enumerate(zip(arch.ops, arch.inputs, arch.variants), start=1):
            ax.add_patch(Rectangle((s, y), 0.8, 0.5, facecolor=colours.get(op, "white"), edgecolor="black"))
            text = op + ("\n" + variant_suffix(op, variant)[1:-1] if variant else "")
            ax.text(s + 0.4, y + 0.25, text, ha="center", va="center", fontsize=7 if not variant else 6,
                    color="white", linespacing=0.9)
            for i in inputs:
                if i == s - 1:
                    continue
                width = s - i
                ax.add_patch(Arc(((s + i) / 2 + 0.4, y + 0.5), width, 0.5 + 0.08 * width, theta1=0, theta2=180,
                                 linewidth=0.6, color="#555555", alpha=0.7))
        ax.text(-0.2, y + 0.25, label, ha="right", va="center", fontsize=8)
    ax.set_xlim(-0.2, n + 1)
    ax.set_ylim(-0.3, len(rows) * 1.25 + 0.2)
    ax.axis("off")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in colours.items()], loc="upper right",
              bbox_to_anchor=(1.0, 1.08), ncol=max(len(colours), 1), fontsize=7, frameon=False)
    ax.set_title("architectures (arcs: inputs other than the previous slot)", fontsize=9, loc="left")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def plot_learning_curves(curves: dict[str, list[dict]], path: Path, ylabel: str = "dev MLM loss (nats)") -> None:
    """The curve's ``loss`` (dev MLM loss in nats; the generator's under ELECTRA) against
    tokens seen, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lvsearch.io import save_figure

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, rows in curves.items():
        pts = [(r["tokens"], r["loss"]) for r in rows if r.get("loss") is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=label)
    ax.set_xlabel("tokens seen")
    ax.set_ylabel(ylabel)
    ax.set_title("retraining curves (same data, steps and seed policy)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
