// ShardedIndex: a BinaryIndex split by rows over several devices, for a database larger than one
// GPU or searches faster than one GPU gives.
//
// Each device holds a shard: a BinaryIndex of the same options with some of the rows. Every add()
// splits its rows into contiguous parts, one per shard, giving each shard the rows that bring it
// closest to its weight's share of all rows (ShardedIndexOptions::weights). A search runs on
// every shard at once and merges their lists on the host into exactly what one BinaryIndex
// holding every row would return, on any device: the same ids (global row numbers, as
// BinaryIndex numbers them), scores, order and tie rule (equal distances or scores by ascending
// id). With rescoring, the shards' Hamming lists are merged into the global candidate list first,
// and each shard rescores only its candidates in it, so the candidates are those one index would
// rescore. What the first add() fixes (first_add_mean thresholds, the int8 scale) is computed
// once over all its rows, as one index would. Devices of different backends can be mixed (cuda
// with vulkan, a GPU with cpu): the ops are bit-exact on every backend. A device may appear more
// than once (two shards on one GPU).
//
// save() writes exactly the file (docs/SEARCH.md, "File format") that one BinaryIndex holding
// every row would write, rows in global order: a ShardedIndex's file loads as a BinaryIndex and a
// BinaryIndex's as a ShardedIndex, on any number of devices. load() places the rows as one add()
// of all of them on an empty index would: shard s gets a contiguous run of rows by the weights.
//
// Placement never changes results; it decides speed: a shard's search takes as long as its rows,
// so weights should follow the devices' search speed. Host merging costs O(queries * k * shards).
//
// Thread safety: calls may come from several threads; they run one at a time. Every call returns
// only after the device work it submitted on every shard has completed (or failed). On any error
// an add() leaves every shard as it was before the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "ferry/binary_index.hpp"
#include "ferry/device.hpp"
#include "ferry/status.hpp"

namespace ferry {

// The most shards of one index.
inline constexpr std::size_t kShardedIndexMaxShards = 64;

struct ShardedIndexOptions {
  BinaryIndexOptions index;  // every shard's options (memory budgets are per shard)
  // Per device, its share of the rows (relative, each 1 to 2^20); empty: equal shares.
  std::vector<std::uint32_t> weights;
};

class ShardedIndex {
 public:
  // One shard per device, in order (1 to kShardedIndexMaxShards devices). Errors name the field
  // and value, or the device whose shard could not be made.
  static Result<ShardedIndex> create(std::span<const Device> devices,
                                     const ShardedIndexOptions& options);
  // Reads an index file saved by save() or BinaryIndex::save() onto `devices`, one shard each,
  // every shard placed by `memory`; the rows are split by `weights` (as create()'s
  // ShardedIndexOptions::weights; empty: equal shares) as one add() of all of them would split
  // them. The devices and weights are checked as create() checks them, the file as
  // BinaryIndex::load checks it (errors name the file). On any error nothing is loaded.
  static Result<ShardedIndex> load(std::span<const Device> devices,
                                   const std::filesystem::path& path,
                                   const BinaryIndexMemory& memory = {},
                                   std::vector<std::uint32_t> weights = {});

  ShardedIndex();
  ShardedIndex(ShardedIndex&&) noexcept;
  ShardedIndex& operator=(ShardedIndex&&) noexcept;
  ~ShardedIndex();

  // As BinaryIndex::add, add_codes, search and search_codes (ferry/binary_index.hpp), over all
  // shards; ids are global row numbers.
  Result<std::uint64_t> add(std::span<const std::byte> vectors, std::uint64_t rows);
  Result<std::uint64_t> add(std::span<const float> vectors, std::uint64_t rows);  // float32
  Result<std::uint64_t> add_codes(std::span<const std::byte> codes, std::uint64_t rows);
  Result<SearchResults> search(std::span<const std::byte> queries, std::uint32_t queries_count,
                               const SearchParams& params) const;
  Result<SearchResults> search(std::span<const float> queries, std::uint32_t queries_count,
                               const SearchParams& params) const;
  Result<SearchResults> search_codes(std::span<const std::byte> query_codes,
                                     std::uint32_t queries, const SearchParams& params) const;

  // Writes the index to `path` atomically, in BinaryIndex's file format, as one BinaryIndex of
  // every row would (the same bytes).
  Status save(const std::filesystem::path& path) const;

  std::uint64_t size() const;  // rows added, over all shards
  std::size_t shard_count() const;
  // The options as given (index options as validated); empty options on a moved-from index.
  const ShardedIndexOptions& options() const;
  // As BinaryIndex's: the thresholds and int8 scale in use, the same on every shard.
  std::vector<float> thresholds() const;
  float int8_scale() const;
  // Per shard, in device order: its rows and memory (BinaryIndexStats::rows are its own).
  std::vector<BinaryIndexStats> shard_stats() const;

  explicit operator bool() const noexcept { return state_ != nullptr; }

  struct State;

 private:
  explicit ShardedIndex(std::unique_ptr<State> state);
  static BinaryIndex::State* state_of(const BinaryIndex& index);
  std::unique_ptr<State> state_;
};

}  // namespace ferry
