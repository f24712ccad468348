#!/usr/bin/env python3
"""Baselines of `ferry bench search` that live in Python packages, run by the bench in the same
run as ferry's search, on the same codes:

  faiss  FAISS IndexBinaryFlat from the faiss-cpu wheel (CPU, --threads OpenMP threads)
  torch  PyTorch on a CUDA device: codes as +-1 float16, one GEMM of every query against every
         row (Hamming = (bits - dot) / 2), then torch.topk

The codes file holds the database rows, then the queries (bits / 8 bytes per code, FAISS's bit
order). Output, one "key value..." line each: version, median_seconds, best_seconds, reps and
sample_distances (the k distances of each --sample query, for the bench to check). Exit status 3:
the package is missing (the bench then says so and goes on without this baseline).
"""
import argparse
import sys
import time


def timed(run, min_time_ms):
    """A warm-up, then runs until 3 and min_time_ms (1 when the warm-up took over 2 s)."""
    start = time.perf_counter()
    first = run()
    once = time.perf_counter() - start > 2.0
    samples = []
    begin = time.perf_counter()
    while True:
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
        if once or (len(samples) >= 3 and (time.perf_counter() - begin) * 1e3 >= min_time_ms):
            break
    samples.sort()
    mid = len(samples) // 2
    median = samples[mid] if len(samples) % 2 else (samples[mid - 1] + samples[mid]) / 2
    return first, median, samples[0], len(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", choices=["faiss", "torch"])
    parser.add_argument("--codes", required=True)
    parser.add_argument("--bits", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--queries", type=int, required=True)
    parser.add_argument("--k", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--min-time-ms", type=float, default=500)
    parser.add_argument("--sample", default="")
    args = parser.parse_args()
    try:
        import numpy as np
        if args.baseline == "faiss":
            import faiss
        else:
            import torch
            if not torch.cuda.is_available():
                print("torch has no CUDA device", file=sys.stderr)
                return 3
    except ImportError as error:
        print(error, file=sys.stderr)
        return 3

    code_bytes = args.bits // 8
    codes = np.fromfile(args.codes, dtype=np.uint8)
    if codes.size != (args.rows + args.queries) * code_bytes:
        print(f"{args.codes}: {codes.size} bytes, expected "
              f"{(args.rows + args.queries) * code_bytes}", file=sys.stderr)
        return 1
    codes = codes.reshape(args.rows + args.queries, code_bytes)
    database, queries = codes[:args.rows], codes[args.rows:]
    sample = [int(q) for q in args.sample.split(",") if q]

    if args.baseline == "faiss":
        index = faiss.IndexBinaryFlat(args.bits)
        index.add(database)
        if args.threads > 0:
            faiss.omp_set_num_threads(args.threads)
        version = f"FAISS {faiss.__version__} (faiss-cpu wheel, python)"
        (distances, _), median, best, reps = timed(lambda: index.search(queries, args.k),
                                                    args.min_time_ms)
        sampled = [int(d) for q in sample for d in distances[q]]
    else:
        device = torch.device("cuda", args.device)
        # Bit j of a code is bit j % 8 of byte j / 8 (little-endian bit order), as +-1.
        def signs(rows):
            bits = np.unpackbits(rows, axis=1, bitorder="little")
            return torch.from_numpy(bits).to(device).half() * 2 - 1
        db, qs = signs(database), signs(queries)
        del codes, database

        def search():
            dot = qs @ db.T  # bits - 2 * Hamming, exact in float16 up to 2048 bits
            top = torch.topk(dot, args.k, dim=1, largest=True)
            torch.cuda.synchronize(device)
            return top

        version = f"PyTorch {torch.__version__} +-1 float16 GEMM + topk on {torch.cuda.get_device_name(device)}"
        top, median, best, reps = timed(search, args.min_time_ms)
        hamming = ((args.bits - top.values.float()) / 2).round().int().cpu().numpy()
        sampled = [int(d) for q in sample for d in hamming[q]]

    print("version", version)
    print("median_seconds", median)
    print("best_seconds", best)
    print("reps", reps)
    print("sample_distances", *sampled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
