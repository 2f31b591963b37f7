#include "engine/draft_batcher.h"

#include <algorithm>
#include <vector>

namespace pagoda {

Status DraftBatcher::draft(std::span<const DraftPiece> first, std::span<const int32_t> num_drafts,
                           const KvManager& kv, const DraftCallbacks& cb,
                           std::vector<std::vector<int32_t>>& drafts) {
  const OnSampled sampled = [&](const DraftPiece& piece, int32_t row, int32_t sampled_id) {
    const int32_t token = cb.to_target ? cb.to_target(sampled_id) : sampled_id;
    drafts[piece.draft_index].push_back(token);
    if (cb.on_sampled) cb.on_sampled(piece, row, token);
  };
  Status status = run(first, kv, cb, sampled);
  pieces_.assign(first.begin(), first.end());
  while (status.ok()) {
    next_.clear();
    for (const DraftPiece& p : pieces_) {
      const std::vector<int32_t>& d = drafts[p.draft_index];
      if (std::ssize(d) >= num_drafts[p.draft_index]) continue;
      cb.feed(p.seq_id, d.back());
      next_.push_back({p.seq_id, p.end, p.end + 1, p.draft_index, p.kv_start});
    }
    if (next_.empty()) break;
    pieces_.swap(next_);
    status = run(pieces_, kv, cb, sampled);
  }
  if (!status.ok()) {
    for (auto& d : drafts) d.clear();
  }
  return status;
}

Status DraftBatcher::run(std::span<const DraftPiece> pieces, const KvManager& kv,
                         const DraftCallbacks& cb, const OnSampled& on_sampled) {
  const int32_t max_tokens = static_cast<int32_t>(runner_.max_num_batched_tokens());
  const int32_t max_seqs = static_cast<int32_t>(runner_.max_num_seqs());
  const int32_t bs = kv.block_size();
  struct Sampled {
    size_t piece;  // index in pieces
    int32_t row;   // of the step
  };
  std::vector<Sampled> sampled;
  std::vector<int64_t> step_seqs;
  size_t p = 0;
  int32_t done = 0;  // rows of pieces[p] already run
  while (p < pieces.size()) {
    step_.clear();
    sampled.clear();
    step_seqs.clear();
    step_.query_start_loc.push_back(0);
    while (p < pieces.size() && static_cast<int32_t>(step_seqs.size()) < max_seqs &&
           step_.num_tokens() < max_tokens) {
      const DraftPiece& piece = pieces[p];
      const std::span<const int32_t> table = kv.block_table(piece.seq_id);
      const int32_t from = piece.begin + done;
      const int32_t n = std::min(piece.end - from, max_tokens - step_.num_tokens());
      for (int32_t pos = from; pos < from + n; ++pos) {
        const int32_t kv_row = pos - piece.kv_start;
        step_.token_ids.push_back(cb.token_at(piece.seq_id, pos));
        step_.positions.push_back(pos);
        step_.slot_mapping.push_back(table[static_cast<size_t>(kv_row / bs)] * bs + kv_row % bs);
      }
      step_.query_start_loc.push_back(step_.num_tokens());
      step_.seq_lens.push_back(from + n - piece.kv_start);
      step_.position_offsets.push_back(piece.kv_start);
      step_seqs.push_back(piece.seq_id);
      step_.max_blocks_per_seq =
          std::max(step_.max_blocks_per_seq, static_cast<int32_t>(table.size()));
      if (from + n < piece.end) {
        done += n;  // the step is full: the rest of this piece goes to the next one
        break;
      }
      step_.logits_rows.push_back(step_.num_tokens() - 1);
      SamplingRow row;
      row.temperature = 0.0f;  // greedy
      step_.sampling.rows.push_back(row);
      sampled.push_back({p, step_.num_tokens() - 1});
      ++p;
      done = 0;
    }
    const size_t width = static_cast<size_t>(step_.max_blocks_per_seq);
    step_.block_tables.assign(step_seqs.size() * width, 0);
    for (size_t s = 0; s < step_seqs.size(); ++s) {
      const std::span<const int32_t> table = kv.block_table(step_seqs[s]);
      std::copy(table.begin(), table.end(),
                step_.block_tables.begin() + static_cast<std::ptrdiff_t>(s * width));
    }
    PAGODA_RETURN_IF_ERROR(runner_.execute(step_, &out_));
    for (size_t r = 0; r < sampled.size(); ++r) {
      on_sampled(pieces[sampled[r].piece], sampled[r].row, out_.token_ids[r]);
    }
  }
  return Status::Ok();
}

}  // namespace pagoda
