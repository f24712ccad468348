// BinaryIndex::search and search_codes, per block of queries (as many as the work buffers' bound
// allows):
//   1. the queries, as float32 values (normalized for cosine), uploaded and quantized; or their
//      codes (search_codes) uploaded as they are;
//   2. hamming_topk over each device code segment, then over the host segments streamed in chunks
//      through the upload staging pool: two device stream buffers alternate, so the upload of
//      chunk i + 1 (upload queue) overlaps the search of chunk i (compute queue);
//   3. every chunk's list downloaded and merged on the host into the global top list (exact:
//      ascending distance, then ascending global id);
//   4. with rescore: each kept-vector segment rescores the candidates that fall in it (rescore
//      reads device segments, and host segments in place), and the lists are merged with the
//      rescore's own order.
// An index whose codes are one device segment (and, to rescore, its vectors another) skips the
// host steps: hamming_topk's lists are the candidates as they are, rescore reads them, and one
// download brings the final lists (device_block): a batch is one round trip.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <string>

#include "core/checked.hpp"
#include "core/host_workers.hpp"
#include "core/trace.hpp"
#include "ferry/ops/binary_quantize.hpp"
#include "ferry/ops/hamming_topk.hpp"
#include "ferry/ops/rescore.hpp"
#include "ferry/transfer.hpp"
#include "index/host_vectors.hpp"
#include "index/index_state.hpp"

namespace ferry {
namespace {

// A part of the database one hamming_topk searches: a device segment, or a chunk of a host
// segment streamed to the device.
struct SearchPart {
  std::uint64_t first_row = 0;
  std::uint64_t rows = 0;
  const index::Segment* segment = nullptr;
  std::uint64_t local_row = 0;  // within the segment
};

// The parts holding rows [0, rows): device segments whole, host segments in chunks of at most
// chunk_rows.
std::vector<SearchPart> search_parts(const index::SegmentStore& codes, std::uint64_t rows,
                                     std::uint64_t chunk_rows) {
  std::vector<SearchPart> parts;
  for (const index::Segment& segment : codes.segments()) {
    if (segment.first_row >= rows) break;
    const std::uint64_t filled = std::min(segment.end_row(), rows) - segment.first_row;
    const std::uint64_t piece = segment.on_device() ? filled : chunk_rows;
    for (std::uint64_t local = 0; local < filled; local += piece) {
      parts.push_back({segment.first_row + local, std::min(piece, filled - local), &segment, local});
    }
  }
  return parts;
}

// Ranges of queries the host merges and routes on its workers: on one core of an H200 host, the
// merges and candidate routing of a 1000-query rescoring search took ~20 ms, three times the
// device's part (docs/PERFORMANCE.md).
constexpr std::uint32_t kQueriesPerRange = 32;

// Runs body(first, end) over ranges of kQueriesPerRange of the `count` queries (the last one
// shorter), on the host's workers. An allocation failure in a range is the call's error.
Status for_query_ranges(std::uint32_t count, const char* what,
                        const std::function<void(std::uint32_t, std::uint32_t)>& body) {
  const std::size_t ranges = (std::size_t{count} + kQueriesPerRange - 1) / kQueriesPerRange;
  std::atomic<bool> failed{false};
  detail::parallel_for(ranges, detail::host_worker_count() + 1, [&](std::size_t r) {
    const auto first = static_cast<std::uint32_t>(r * kQueriesPerRange);
    try {
      body(first, std::min(count, first + kQueriesPerRange));
    } catch (const std::bad_alloc&) {
      failed = true;
    }
  });
  if (failed) {
    return Status(ErrorCode::resource_exhausted,
                  std::string("BinaryIndex::search: out of host memory ") + what + " of " +
                      std::to_string(count) + " queries");
  }
  return Status();
}

// Downloads `bytes` (a multiple of 4) of `source` into `words` (reused: see State::Work).
Status download_words(const Queue& queue, const StagingPool& pool, const BufferRef& source,
                      std::uint64_t bytes, const TimelinePoint& ready,
                      std::vector<std::uint32_t>& words) {
  words.resize(bytes / 4);
  SubmitSync sync;
  sync.wait.push_back(ready);
  return ferry::download(queue, pool, source, 0, std::as_writable_bytes(std::span(words)), sync);
}

}  // namespace

std::uint64_t BinaryIndex::State::queries_per_block(std::uint32_t count, std::uint32_t candidates,
                                                   std::uint32_t k) const {
  // The float32 queries, and the lists of every part searched and every kept-vector segment.
  const std::uint64_t chunk_rows =
      std::max<std::uint64_t>(1, std::min(options.memory.staging_slab_bytes,
                                          options.memory.segment_bytes) / code_bytes);
  const std::uint64_t parts = search_parts(codes, rows, chunk_rows).size();
  const std::uint64_t vector_segments = vectors.segments().size();
  const std::uint64_t per_query = std::max<std::uint64_t>(
      {std::uint64_t{options.dims} * 4, parts * candidates * 8,
       vector_segments * (std::uint64_t{candidates} * 4 + std::uint64_t{k} * 8)});
  return std::clamp<std::uint64_t>(options.memory.segment_bytes / per_query, 1, count);
}

Result<SearchResults> BinaryIndex::State::search(std::span<const std::byte> queries,
                                                 std::uint32_t count, const SearchParams& params,
                                                 QueryInput input) {
  const std::uint32_t candidates = params.rescore ? params.k * params.oversample : params.k;
  SearchResults out;
  out.queries = count;
  out.k = params.k;
  out.ids.assign(std::uint64_t{count} * params.k, kBinaryIndexNoId);
  out.scores.assign(out.ids.size(), std::numeric_limits<float>::quiet_NaN());

  const std::uint64_t block = queries_per_block(count, candidates, params.k);
  const bool on_device = searches_on_device(params.rescore);
  const std::uint64_t row_bytes = input == QueryInput::codes ? code_bytes : input_row_bytes();
  index::SubmittedWork submitted;
  std::vector<std::vector<index::HammingHit>> hits;
  std::vector<std::vector<index::ScoredHit>> best;
  for (std::uint64_t first = 0; first < count; first += block) {
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(block, count - first));
    const std::span<const std::byte> rows_in = queries.subspan(first * row_bytes, n * row_bytes);
    Status status;
    if (on_device) {
      const std::uint64_t at = first * params.k;
      const std::uint64_t size = std::uint64_t{n} * params.k;
      status = device_block(rows_in, input, n, params, candidates,
                            std::span(out.ids).subspan(at, size),
                            std::span(out.scores).subspan(at, size), submitted);
    } else {
      BufferRef rescore_queries{Buffer()};
      status = hamming_block(rows_in, input, n, params, candidates, hits, rescore_queries,
                             submitted);
      if (status.ok() && params.rescore) {
        status = rescore_hits(n, params, hits, rescore_queries, best, submitted);
      }
    }
    if (!status.ok()) {
      submitted.settle();
      if (count > block) {
        status.with_context("queries " + std::to_string(first) + ".." +
                            std::to_string(first + n - 1));
      }
      return status;
    }
    if (on_device) continue;  // device_block wrote its results
    detail::TraceScope traced(detail::trace_of(device), "index: results");
    for (std::uint32_t q = 0; q < n; ++q) {
      const std::uint64_t at = (first + q) * params.k;
      if (params.rescore) {
        for (std::size_t i = 0; i < best[q].size(); ++i) {
          out.ids[at + i] = best[q][i].id;
          out.scores[at + i] = reported_score(best[q][i]);
        }
      } else {
        for (std::size_t i = 0; i < hits[q].size(); ++i) {
          out.ids[at + i] = hits[q][i].id;
          out.scores[at + i] = static_cast<float>(hits[q][i].distance);
        }
      }
    }
  }
  return out;
}

bool BinaryIndex::State::searches_on_device(bool rescore) const {
  const std::vector<index::Segment>& code_segments = codes.segments();
  if (code_segments.empty() || !code_segments[0].on_device() || code_segments[0].end_row() < rows) {
    return false;
  }
  if (!rescore) return true;
  const std::vector<index::Segment>& vector_segments = vectors.segments();
  return !vector_segments.empty() && vector_segments[0].on_device() &&
         vector_segments[0].end_row() >= rows;
}

Status BinaryIndex::State::device_block(std::span<const std::byte> queries, QueryInput input,
                                        std::uint32_t count, const SearchParams& params,
                                        std::uint32_t candidates, std::span<std::uint64_t> ids,
                                        std::span<float> scores, index::SubmittedWork& submitted) {
  CommandList commands;
  FERRY_ASSIGN_OR_RETURN(const index::DeviceQueries on_device,
                         upload_queries(queries, input, count, params, commands, submitted));
  // The Hamming search of every row: its lists are the candidates, ids as they are (the segment
  // starts at row 0).
  const auto kept = static_cast<std::uint32_t>(std::min<std::uint64_t>(candidates, rows));
  const std::uint64_t list_bytes = std::uint64_t{count} * kept * 4;
  FERRY_ASSIGN_OR_RETURN(BufferRef lists,
                         work.results.at_least(device, 2 * list_bytes, "Hamming lists"));
  const HammingTopkBuffers searched{on_device.codes, 0, codes.segments()[0].device, 0,
                                    lists, 0, lists, list_bytes};
  FERRY_RETURN_IF_ERROR(hamming_topk(commands, searched, {code_bytes * 8, count, rows, kept}));
  BufferRef results = lists;
  std::uint32_t width = kept;
  if (params.rescore) {
    width = std::min(params.k, kept);
    RescoreParams p;
    p.element = rescore_element();
    p.metric = rescore_metric();
    p.dims = options.dims;
    p.queries = count;
    p.database_rows = rows;
    p.candidates = kept;
    p.k = width;
    const std::uint64_t rescored_bytes = std::uint64_t{count} * width * 4;
    FERRY_ASSIGN_OR_RETURN(results, work.rescored.at_least(device, 2 * rescored_bytes,
                                                           "rescored lists"));
    const RescoreBuffers rescored{on_device.rescore, 0, vectors.segments()[0].buffer(), 0,
                                  lists, list_bytes, results, 0, results, rescored_bytes};
    FERRY_RETURN_IF_ERROR(rescore(commands, rescored, p));
  }
  SubmitSync sync;
  sync.wait.push_back(on_device.uploaded);
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute.submit(std::move(commands), sync));
  submitted.note(QueueKind::compute, done);
  std::vector<std::uint32_t>& words = work.host.lists;
  const std::uint64_t result_words = std::uint64_t{count} * width;
  FERRY_RETURN_IF_ERROR(download_words(download, readback_pool, results, result_words * 8, done,
                                       words));

  // Rank i of query q: the score (or distance) word, then the index word. Entries past a query's
  // valid ones are padding (an index past the rows), and stay padding in the results.
  detail::TraceScope traced(detail::trace_of(device), "index: results");
  for (std::uint32_t q = 0; q < count; ++q) {
    for (std::uint32_t i = 0; i < width; ++i) {
      const std::uint64_t at = std::uint64_t{q} * width + i;
      const std::uint32_t row = words[result_words + at];
      if (row >= rows) continue;
      const std::uint64_t out = std::uint64_t{q} * params.k + i;
      ids[out] = row;
      scores[out] = params.rescore ? reported_score({words[at], row})
                                   : static_cast<float>(words[at]);
    }
  }
  return Status();
}

Result<index::DeviceQueries> BinaryIndex::State::upload_queries(
    std::span<const std::byte> queries, QueryInput input, std::uint32_t count,
    const SearchParams& params, CommandList& commands, index::SubmittedWork& submitted) {
  const std::uint32_t dims = options.dims;
  index::DeviceQueries out;
  FERRY_ASSIGN_OR_RETURN(out.codes, work.query_codes.at_least(device, std::uint64_t{count} * code_bytes,
                                                              "query codes"));
  if (input == QueryInput::codes) {
    // The codes as they are.
    FERRY_ASSIGN_OR_RETURN(out.uploaded, ferry::upload(upload, upload_pool, queries, out.codes, 0));
    submitted.note(QueueKind::upload, out.uploaded);
    return out;
  }
  // The queries as float32 values (and int8 for int8 rescoring), uploaded and quantized.
  std::vector<float>& values = work.host.query_values;
  values.resize(std::uint64_t{count} * dims);
  {
    detail::TraceScope traced(detail::trace_of(device), "index: query values");
    FERRY_RETURN_IF_ERROR(for_query_ranges(count, "reading the queries", [&](std::uint32_t first,
                                                                             std::uint32_t end) {
      for (std::uint32_t q = first; q < end; ++q) {
        index::row_values(options, queries.data() + std::uint64_t{q} * input_row_bytes(),
                          std::span(values).subspan(std::uint64_t{q} * dims, dims));
      }
    }));
  }
  FERRY_ASSIGN_OR_RETURN(BufferRef query_floats,
                         work.query_floats.at_least(device, values.size() * 4, "queries"));
  FERRY_ASSIGN_OR_RETURN(out.uploaded, ferry::upload(upload, upload_pool,
                                                     std::as_bytes(std::span(values)), query_floats, 0));
  submitted.note(QueueKind::upload, out.uploaded);
  out.rescore = query_floats;
  if (params.rescore && options.keep == KeptVectors::int8) {
    std::vector<std::int8_t>& int8_values = work.host.query_int8;
    int8_values.resize(values.size());
    for (std::uint32_t q = 0; q < count; ++q) {
      index::quantize_int8(std::span(values).subspan(std::uint64_t{q} * dims, dims), int8_scale,
                           int8_values.data() + std::uint64_t{q} * dims);
    }
    FERRY_ASSIGN_OR_RETURN(BufferRef query_int8,
                           work.query_int8.at_least(device, int8_values.size(), "int8 queries"));
    FERRY_ASSIGN_OR_RETURN(out.uploaded, ferry::upload(upload, upload_pool,
                                                       std::as_bytes(std::span(int8_values)),
                                                       query_int8, 0));
    submitted.note(QueueKind::upload, out.uploaded);
    out.rescore = query_int8;
  }
  const BufferRef thresholds_ref =
      thresholds_buffer ? BufferRef(thresholds_buffer) : BufferRef(Buffer());
  BinaryQuantizeParams quantize;
  quantize.rows = count;
  quantize.dims = dims;
  quantize.input_type = ElementType::float32;
  if (thresholds_buffer) quantize.thresholds.buffer = &thresholds_ref;
  FERRY_RETURN_IF_ERROR(binary_quantize(commands, query_floats, 0, out.codes, 0, quantize));
  return out;
}

Status BinaryIndex::State::hamming_block(std::span<const std::byte> queries, QueryInput input,
                                         std::uint32_t count, const SearchParams& params,
                                         std::uint32_t candidates,
                                         std::vector<std::vector<index::HammingHit>>& hits,
                                         BufferRef& rescore_queries,
                                         index::SubmittedWork& submitted) {
  // 1. The queries on the device.
  CommandList commands;
  FERRY_ASSIGN_OR_RETURN(const index::DeviceQueries on_device,
                         upload_queries(queries, input, count, params, commands, submitted));
  const BufferRef& query_codes = on_device.codes;
  const TimelinePoint& uploaded = on_device.uploaded;
  rescore_queries = on_device.rescore;

  // 2. hamming_topk over every part; each part's lists at its own place in the results buffer.
  const std::uint64_t chunk_rows =
      std::max<std::uint64_t>(1, std::min(options.memory.staging_slab_bytes,
                                          options.memory.segment_bytes) / code_bytes);
  const std::vector<SearchPart> parts = search_parts(codes, rows, chunk_rows);
  std::vector<std::uint64_t> part_offset(parts.size() + 1, 0);
  std::vector<std::uint32_t> part_k(parts.size());
  for (std::size_t p = 0; p < parts.size(); ++p) {
    part_k[p] = static_cast<std::uint32_t>(std::min<std::uint64_t>(candidates, parts[p].rows));
    part_offset[p + 1] = part_offset[p] + std::uint64_t{count} * part_k[p] * 8;
  }
  FERRY_ASSIGN_OR_RETURN(BufferRef results,
                         work.results.at_least(device, part_offset.back(), "Hamming lists"));
  auto search_part = [&](CommandList& into, std::size_t p, const BufferRef& database,
                         std::uint64_t database_offset) {
    const std::uint64_t list_bytes = std::uint64_t{count} * part_k[p] * 4;
    const HammingTopkBuffers buffers{query_codes, 0, database, database_offset,
                                     results, part_offset[p], results, part_offset[p] + list_bytes};
    return hamming_topk(into, buffers,
                        {code_bytes * 8, count, parts[p].rows, part_k[p]});
  };

  // Device parts: one submission each (the first also quantizes the queries), so that the device
  // scratch a part's search takes returns before later parts ask for theirs: a list of a large
  // index's every part would hold more scratch than the device has.
  std::size_t p = 0;
  TimelinePoint searched;
  SubmitSync sync;
  sync.wait.push_back(uploaded);
  do {
    if (p < parts.size() && parts[p].segment->on_device()) {
      FERRY_RETURN_IF_ERROR(search_part(commands, p, parts[p].segment->device,
                                        parts[p].local_row * code_bytes));
      ++p;
    }
    FERRY_ASSIGN_OR_RETURN(searched, compute.submit(std::move(commands), sync));
    submitted.note(QueueKind::compute, searched);
    commands = CommandList();
    sync.wait.clear();  // later submissions follow in queue order
  } while (p < parts.size() && parts[p].segment->on_device());

  // Host parts, streamed: chunk i's upload waits for the search that last read its stream buffer
  // (chunk i - 2); its search waits for its upload.
  std::array<BufferRef, 2> stream{BufferRef(Buffer()), BufferRef(Buffer())};
  std::array<TimelinePoint, 2> stream_read;
  for (std::size_t chunk = 0; p < parts.size(); ++p, ++chunk) {
    const std::size_t slot = chunk % 2;
    if (chunk < 2) {
      FERRY_ASSIGN_OR_RETURN(stream[slot], work.stream[slot].at_least(device, chunk_rows * code_bytes,
                                                                      "streamed codes"));
    }
    const std::uint64_t bytes = parts[p].rows * code_bytes;
    FERRY_ASSIGN_OR_RETURN(Lease lease, upload_pool.acquire(bytes));
    detail::parallel_memcpy(lease.data().data(),
                            parts[p].segment->host_bytes(code_bytes).data() +
                                parts[p].local_row * code_bytes,
                            bytes, detail::host_worker_count() + 1);
    CommandList upload_commands;
    FERRY_RETURN_IF_ERROR(upload_commands.copy(lease, 0, stream[slot], 0, bytes));
    SubmitSync upload_sync;
    if (stream_read[slot].timeline) upload_sync.wait.push_back(stream_read[slot]);
    FERRY_ASSIGN_OR_RETURN(TimelinePoint streamed,
                           upload.submit(std::move(upload_commands), upload_sync));
    submitted.note(QueueKind::upload, streamed);
    lease.release();
    CommandList search_commands;
    FERRY_RETURN_IF_ERROR(search_part(search_commands, p, stream[slot], 0));
    SubmitSync search_sync;
    search_sync.wait.push_back(streamed);
    FERRY_ASSIGN_OR_RETURN(searched, compute.submit(std::move(search_commands), search_sync));
    submitted.note(QueueKind::compute, searched);
    stream_read[slot] = searched;
  }

  // 3. Every list to the host, merged per query.
  std::vector<std::uint32_t>& lists = work.host.lists;
  FERRY_RETURN_IF_ERROR(download_words(download, readback_pool, results, part_offset.back(),
                                       searched, lists));
  detail::TraceScope traced(detail::trace_of(device), "index: merge Hamming lists");
  hits.assign(count, {});
  return for_query_ranges(count, "merging the Hamming lists", [&](std::uint32_t first,
                                                                 std::uint32_t end) {
    std::vector<index::HammingList> query_lists(parts.size());
    for (std::uint32_t q = first; q < end; ++q) {
      for (std::size_t part = 0; part < parts.size(); ++part) {
        const std::size_t k = part_k[part];
        const std::size_t at = part_offset[part] / 4 + std::size_t{q} * k;
        const std::size_t indices_at = at + std::size_t{count} * k;
        query_lists[part] = {std::span(lists).subspan(at, k),
                             std::span(lists).subspan(indices_at, k), parts[part].first_row};
      }
      hits[q] = index::merge_hamming(query_lists, candidates);
    }
  });
}

RescoreElement BinaryIndex::State::rescore_element() const {
  return options.keep == KeptVectors::int8 ? RescoreElement::int8 : RescoreElement::float32;
}

RescoreMetric BinaryIndex::State::rescore_metric() const {
  return options.metric == IndexMetric::l2 ? RescoreMetric::l2 : RescoreMetric::inner_product;
}

float BinaryIndex::State::reported_score(const index::ScoredHit& hit) const {
  if (rescore_element() == RescoreElement::float32) return std::bit_cast<float>(hit.score_bits);
  const double int8_unit = double{int8_scale} * double{int8_scale};
  return static_cast<float>(static_cast<double>(static_cast<std::int32_t>(hit.score_bits)) /
                            int8_unit);
}

Status BinaryIndex::State::rescore_hits(std::uint32_t count, const SearchParams& params,
                                        const std::vector<std::vector<index::HammingHit>>& hits,
                                        const BufferRef& queries_ref,
                                        std::vector<std::vector<index::ScoredHit>>& best,
                                        index::SubmittedWork& submitted) {
  const RescoreElement element = rescore_element();
  const RescoreMetric metric = rescore_metric();
  best.assign(count, {});
  std::optional<detail::TraceScope> traced(std::in_place, detail::trace_of(device),
                                           "index: candidates per segment");

  // Each kept-vector segment's candidates: per query, the local rows of its hits, padded to the
  // segment's widest list with kRescoreNoIndex (which rescore skips). Each hit's segment is
  // found once (a branch-free binary search over the segments' first rows), by ranges of queries
  // on the host's workers: a 1000-query batch routes 100,000 hits to dozens of segments, which
  // took milliseconds as one pass per segment or on one thread.
  struct Part {
    const index::Segment* segment = nullptr;
    std::uint64_t rows = 0;
    std::uint32_t width = 0;
    std::uint32_t k = 0;
    std::uint64_t candidates_at = 0;  // bytes into the candidates buffer
    std::uint64_t scores_at = 0;      // bytes into the rescored buffer
  };
  const std::vector<index::Segment>& segments = vectors.segments();
  std::vector<std::uint64_t> first_rows(segments.size());
  for (std::size_t s = 0; s < segments.size(); ++s) first_rows[s] = segments[s].first_row;
  auto segment_of = [&](std::uint64_t id) {
    std::size_t base = 0;
    for (std::size_t n = first_rows.size(); n > 1;) {
      const std::size_t half = n / 2;
      base = first_rows[base + half] <= id ? base + half : base;
      n -= half;
    }
    return static_cast<std::uint32_t>(base);
  };
  std::vector<std::uint64_t> first_hit(count + 1, 0);  // query q's hits: from first_hit[q]
  for (std::uint32_t q = 0; q < count; ++q) first_hit[q + 1] = first_hit[q] + hits[q].size();
  std::vector<std::uint32_t>& hit_segment = work.host.hit_segment;
  hit_segment.resize(first_hit[count]);
  // Per range of queries, the widest list of each segment.
  std::vector<std::vector<std::uint32_t>> range_width((count + kQueriesPerRange - 1) /
                                                      kQueriesPerRange);
  FERRY_RETURN_IF_ERROR(for_query_ranges(count, "routing candidates", [&](std::uint32_t first,
                                                                          std::uint32_t end) {
    std::vector<std::uint32_t>& width = range_width[first / kQueriesPerRange];
    std::vector<std::uint32_t> in_query(segments.size(), 0);
    width.assign(segments.size(), 0);
    for (std::uint32_t q = first; q < end; ++q) {
      std::uint32_t* routed = hit_segment.data() + first_hit[q];
      for (std::size_t i = 0; i < hits[q].size(); ++i) {
        const std::uint32_t s = routed[i] = segment_of(hits[q][i].id);
        width[s] = std::max(width[s], ++in_query[s]);
      }
      for (std::size_t i = 0; i < hits[q].size(); ++i) in_query[routed[i]] = 0;
    }
  }));
  std::vector<Part> parts;
  std::vector<std::size_t> part_of(segments.size(), 0);
  for (std::size_t s = 0; s < segments.size(); ++s) {
    std::uint32_t width = 0;
    for (const auto& widths : range_width) width = std::max(width, widths[s]);
    if (width == 0) continue;
    Part part;
    part.segment = &segments[s];
    part.rows = std::min(segments[s].end_row(), rows) - segments[s].first_row;
    part.width = width;
    part.k = std::min(params.k, part.width);
    part_of[s] = parts.size();
    parts.push_back(part);
  }
  if (parts.empty()) return Status();  // no candidates at all: every result stays padding

  std::uint64_t candidate_words = 0, scored_bytes = 0;
  for (Part& part : parts) {
    part.candidates_at = candidate_words * 4;
    candidate_words += std::uint64_t{count} * part.width;
    part.scores_at = scored_bytes;
    scored_bytes += std::uint64_t{count} * part.k * 8;
  }
  std::vector<std::uint32_t>& candidates = work.host.candidates;
  candidates.assign(candidate_words, kRescoreNoIndex);
  FERRY_RETURN_IF_ERROR(for_query_ranges(count, "routing candidates", [&](std::uint32_t first,
                                                                          std::uint32_t end) {
    std::vector<std::uint32_t> in_query(segments.size(), 0);
    for (std::uint32_t q = first; q < end; ++q) {
      const std::uint32_t* routed = hit_segment.data() + first_hit[q];
      for (std::size_t i = 0; i < hits[q].size(); ++i) {
        const Part& part = parts[part_of[routed[i]]];
        candidates[part.candidates_at / 4 + std::uint64_t{q} * part.width + in_query[routed[i]]++] =
            static_cast<std::uint32_t>(hits[q][i].id - part.segment->first_row);
      }
      for (std::size_t i = 0; i < hits[q].size(); ++i) in_query[routed[i]] = 0;
    }
  }));
  traced.reset();
  FERRY_ASSIGN_OR_RETURN(BufferRef candidates_ref,
                         work.candidates.at_least(device, candidate_words * 4, "candidates"));
  FERRY_ASSIGN_OR_RETURN(BufferRef rescored,
                         work.rescored.at_least(device, scored_bytes, "rescored lists"));
  FERRY_ASSIGN_OR_RETURN(TimelinePoint uploaded,
                         ferry::upload(upload, upload_pool, std::as_bytes(std::span(candidates)),
                                       candidates_ref, 0));
  submitted.note(QueueKind::upload, uploaded);

  CommandList commands;
  for (const Part& part : parts) {
    RescoreParams p;
    p.element = element;
    p.metric = metric;
    p.dims = options.dims;
    p.queries = count;
    p.database_rows = part.rows;
    p.candidates = part.width;
    p.k = part.k;
    const std::uint64_t list_bytes = std::uint64_t{count} * part.k * 4;
    const RescoreBuffers buffers{queries_ref,  0, part.segment->buffer(), 0,
                                 candidates_ref, part.candidates_at,
                                 rescored,       part.scores_at,
                                 rescored,       part.scores_at + list_bytes};
    FERRY_RETURN_IF_ERROR(rescore(commands, buffers, p));
  }
  SubmitSync sync;
  sync.wait.push_back(uploaded);
  FERRY_ASSIGN_OR_RETURN(TimelinePoint done, compute.submit(std::move(commands), sync));
  submitted.note(QueueKind::compute, done);
  std::vector<std::uint32_t>& lists = work.host.lists;
  FERRY_RETURN_IF_ERROR(download_words(download, readback_pool, rescored, scored_bytes, done,
                                       lists));

  traced.emplace(detail::trace_of(device), "index: merge rescored lists");
  return for_query_ranges(count, "merging the rescored lists", [&](std::uint32_t first,
                                                                  std::uint32_t end) {
    std::vector<index::ScoredList> query_lists(parts.size());
    for (std::uint32_t q = first; q < end; ++q) {
      for (std::size_t i = 0; i < parts.size(); ++i) {
        const Part& part = parts[i];
        const std::size_t at = part.scores_at / 4 + std::size_t{q} * part.k;
        const std::size_t indices_at = at + std::size_t{count} * part.k;
        query_lists[i] = {std::span(lists).subspan(at, part.k),
                          std::span(lists).subspan(indices_at, part.k), part.segment->first_row};
      }
      best[q] = index::merge_rescored(query_lists, params.k, element, metric);
    }
  });
}

}  // namespace ferry
