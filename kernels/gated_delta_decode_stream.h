/// The single-token decode stream of kernels/gated_delta_decode_stream.cu, used by gated_delta_recurrent.
#pragma once
#include "kernels/gated_delta.h"

namespace statecut::cuda::detail {

/// True when every sequence has at most one token (seq_len 1, or max_seq_len <= 1 with cu_seqlens), the state is
/// fp32 and K is a multiple of 4: the cases decode_stream takes.
bool decode_stream_applies(const GatedDeltaArgs& a);

/// One decode step of every (sequence, value head), state streamed through persistent warps; arguments as
/// gated_delta_recurrent's (already checked), final_state may alias initial_state.
cudaError_t decode_stream(const GatedDeltaArgs& a, cudaStream_t stream);

}  // namespace statecut::cuda::detail
