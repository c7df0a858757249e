"""``lvsearch latency measure|validate|predict|time``: a device's latency table, its validation,
architectures' predicted and measured latency."""

from __future__ import annotations

import argparse

EPILOG = """\
examples:
  lvsearch latency measure --supernet runs/sn --out runs/latency-cpu.json
  lvsearch latency measure --supernet runs/sn --device cuda --batch 32 --out runs/latency-h200.json
  lvsearch latency validate --supernet runs/sn --table runs/latency-cpu.json --archs 50 --out runs/latency-check.json
  lvsearch latency predict --table runs/latency-cpu.json --arch runs/search/best.json
  lvsearch latency time --supernet runs/sn --arch bert runs/search/best.json --table runs/latency-cpu.json

The table holds the forward time of each op of the supernet's space (with its residual and
LayerNorm), of mixing k inputs and of the embeddings and output stage, in ms per batch, each
the median over --repeats timed blocks after --warmup calls. A search uses it with
'lvsearch evolve --latency-table T --max-latency MS'.
"""


def _timing_arguments(p: argparse.ArgumentParser, *, sizes: bool, calibrate: bool = True, table: bool = False) -> None:
    """The timing options; with ``table`` (a command with an optional --table), --batch,
    --seq-len and --dtype default to None (the table's, else 8, the training length, float32)."""
    from lvsearch.argtypes import count_in
    from lvsearch.argtypes import positive_count as positive_int
    from lvsearch.latency.table import MAX_BATCH, MAX_CALLS, MAX_THREADS

    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default cpu)")
    if sizes:
        of_table = "; with --table, the table's" if table else ""
        p.add_argument("--batch", type=count_in(1, MAX_BATCH), default=None if table else 8,
                       help=f"sequences per forward (default 8{of_table})")
        p.add_argument("--seq-len", type=positive_int, default=None,
                       help=f"tokens per sequence (default: the supernet's training length{of_table})")
        p.add_argument("--dtype", choices=["float32", "bfloat16"], default=None if table else "float32",
                       help=f"default float32{of_table}")
    if sizes and calibrate:
        p.add_argument("--calibrate", type=count_in(0, MAX_CALLS), default=20, metavar="N",
                       help="time N sampled architectures end to end and fit the table sum's linear correction "
                            "(default 20; 0: predict with the raw sum)")
    p.add_argument("--threads", type=count_in(1, MAX_THREADS), default=None,
                   help="CPU threads (default: torch's default here)")
    p.add_argument("--warmup", type=count_in(1, MAX_CALLS), default=10, help="untimed calls before timing (default 10)")
    p.add_argument("--repeats", type=count_in(1, MAX_CALLS), default=15, help="timed blocks per entry; the median is kept (default 15)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out written by this command")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("latency", help="measure and predict latency on this device",
                       description="Per-op latency tables, the latency predictor and its validation "
                       "(docs/architecture.md, 'Latency').", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(group_parser=p)
    ss = p.add_subparsers(dest="latency_command", metavar="SUBCOMMAND")
    m = ss.add_parser("measure", help="measure a latency table of a supernet's ops on this device",
                      description="Time every op of a supernet's space (each variant) and each ELC mixing width on "
                      "this device at one batch, length, dtype and thread count, then fit a linear correction of "
                      "the table sum on --calibrate architectures timed end to end. The table predicts an "
                      "architecture's latency as the calibrated sum (a latency lookup table, as in FBNet, Wu et al. 2019).",
                      epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--supernet", required=True, metavar="RUN", help="a train-supernet run folder")
    m.add_argument("--out", required=True, metavar="TABLE.json", help="the table to write")
    _timing_arguments(m, sizes=True)
    m.set_defaults(func=run_measure)

    v = ss.add_parser("validate", help="compare predicted with measured end-to-end latency on sampled architectures",
                      description="Sample --archs architectures (seeded, not the calibration's), time each end to end "
                      "on this device and compare with the table's prediction: absolute percentage errors, mean "
                      "signed error and the Spearman ρ of the ranking (warned about below 0.5: a latency search "
                      "needs the order right).",
                      epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("--supernet", required=True, metavar="RUN", help="the run the table was measured from")
    v.add_argument("--table", required=True, metavar="TABLE.json", help="a table from 'lvsearch latency measure'")
    v.add_argument("--out", required=True, metavar="REPORT.json", help="the validation record to write")
    from lvsearch.argtypes import count_in
    from lvsearch.latency.table import MAX_CALLS

    v.add_argument("--archs", type=count_in(3, MAX_CALLS, "a rank correlation needs 3 architectures"), default=50,
                   help="architectures to sample (default 50; at least 3, for the rank correlation)")
    v.add_argument("--seed", type=int, default=0, help="sampling seed (default 0; a table's calibration draws with seed 1)")
    v.add_argument("--latency-any-device", action="store_true", help="accept a table measured on another device")
    _timing_arguments(v, sizes=False)
    v.set_defaults(func=run_validate)

    r = ss.add_parser("predict", help="predicted latency of architectures from a table",
                      epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--table", required=True, metavar="TABLE.json", help="a table from 'lvsearch latency measure'")
    r.add_argument("--arch", required=True, nargs="+", metavar="ARCH",
                   help="architecture JSON files or names (bert, sandwich, random:SEED)")
    r.set_defaults(func=run_predict)

    t = ss.add_parser("time", help="measure architectures' end-to-end latency on this device",
                      description="Time each architecture end to end: extracted from the supernet as the standalone "
                      "model a retrain builds (the weights do not change the time), median over --repeats blocks.",
                      epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--supernet", required=True, metavar="RUN", help="a train-supernet run folder (the space and sizes)")
    t.add_argument("--arch", required=True, nargs="+", metavar="ARCH",
                   help="architecture JSON files or names (bert, sandwich, random:SEED)")
    t.add_argument("--table", default=None, metavar="TABLE.json",
                   help="also predict from this table, timing at its batch, length and dtype (another "
                        "--batch, --seq-len or --dtype is refused) and, unless --threads is given, its threads")
    t.add_argument("--out", default=None, metavar="TIMES.json", help="also write the record to this file")
    t.add_argument("--latency-any-device", action="store_true", help="accept a table measured on another device")
    _timing_arguments(t, sizes=True, calibrate=False, table=True)
    t.set_defaults(func=run_time)


def _opts(args: argparse.Namespace):
    from lvsearch.latency.table import MeasureOptions

    return MeasureOptions(device=args.device, batch=getattr(args, "batch", None) or 8,
                          seq_len=getattr(args, "seq_len", None), threads=args.threads, warmup=args.warmup,
                          repeats=args.repeats, dtype=getattr(args, "dtype", None) or "float32",
                          calibrate=getattr(args, "calibrate", 0))


def run_measure(args: argparse.Namespace) -> int:
    from lvsearch.latency.job import measure
    from lvsearch.ui import console

    table = measure(args.supernet, args.out, _opts(args), overwrite=args.overwrite)
    console.print(f"latency table of {len(table.ops_ms)} ops and {len(table.mixing_ms)} mixing widths on "
                  f"{table.where}, batch {table.batch} × {table.seq_len} tokens: "
                  + ", ".join(f"{op} {ms:.3f} ms" for op, ms in table.ops_ms.items())
                  + f"; overhead {table.overhead_ms:.3f} ms -> {args.out}")
    c = table.calibration
    if c is not None:
        console.print(f"calibration on {c.archs} architectures: measured ≈ {c.intercept_ms:+.3f} ms + {c.slope:.3f} × "
                      f"table sum (median error {100 * c.raw_median_ape:.1f}% → {100 * c.median_ape:.1f}% in sample; "
                      "'lvsearch latency validate' measures new architectures)")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    from lvsearch.latency.job import validate
    from lvsearch.ui import console

    rec = validate(args.supernet, args.table, args.out, archs=args.archs, seed=args.seed, opts=_opts(args),
                   any_device=args.latency_any_device, overwrite=args.overwrite)
    s, raw = rec["summary"], rec["table_sum_summary"]
    rho = s["spearman_rho"]
    rho = (f"{rho:.3f}" if rho is not None and rho == rho else
           f"undefined ({'fewer than 3 architectures' if s['archs'] < 3 else 'constant predictions'})")
    console.print(f"{s['archs']} architectures: median absolute error {100 * s['median_ape']:.1f}%, worst "
                  f"{100 * s['worst_ape']:.1f}%, mean signed {100 * s['mean_signed_error']:+.1f}%, Spearman ρ "
                  f"{rho}; measured {s['measured_ms'][0]:.2f}–{s['measured_ms'][2]:.2f} ms"
                  + (f" (raw table sum: {100 * raw['median_ape']:.1f}% / {100 * raw['worst_ape']:.1f}%)"
                     if rec["calibration"] is not None else "") + f" -> {args.out}")
    from lvsearch.latency.predict import rank_warning
    from lvsearch.ui import warn

    if (words := rank_warning(s)) is not None:
        warn(words)
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from lvsearch.arch import resolve_arch
    from lvsearch.latency.predict import predict_ms
    from lvsearch.latency.table import check_entries, load_table

    table = load_table(args.table)
    space = table.search_space(args.table)
    check_entries(table, args.table, space)
    for spec in args.arch:
        print(f"{spec}: {predict_ms(resolve_arch(spec, space), table):.3f} ms "
                      f"(batch {table.batch} × {table.seq_len} tokens on {table.where})")
    return 0


def run_time(args: argparse.Namespace) -> int:
    from lvsearch.latency.job import time_architectures

    rec = time_architectures(args.supernet, args.arch, args.out, table_path=args.table, opts=_opts(args),
                             requested={"batch": args.batch, "seq_len": args.seq_len, "dtype": args.dtype},
                             any_device=args.latency_any_device, overwrite=args.overwrite)
    from lvsearch.ui import plural

    where = f"batch {rec['batch']} × {rec['seq_len']} tokens on {rec['device_name']}, {plural(rec['threads'], 'thread')}"
    at = (f" from the table's {plural(rec['table_threads'], 'thread')}" if rec["table"] is not None
          and rec["table_threads"] != rec["threads"] else "")
    for r in rec["rows"]:
        pred = f", predicted {r['predicted_ms']:.3f} ms{at}" if r["predicted_ms"] is not None else ""
        print(f"{r['spec']}: {r['measured_ms']:.3f} ms{pred} ({r['params']:,} parameters; {where})")
    if args.out:
        print(f"-> {args.out}")
    return 0
