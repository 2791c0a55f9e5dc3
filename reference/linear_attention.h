/// Linear attention (no normalisation, fla's naive_recurrent_linear_attn with normalize=False), one head:
///   S_t = S_{t-1} + k_t v_t^T,   o_t = S_t^T (scale q_t)          (readout after the update)
/// q, k: [T, dk]  v: [T, dv]  S0, state: [dk, dv]  o: [T, dv]; S0 nullptr = zero state.
///
/// Chunked form, chunks of C rows with carried state S (T need not be a multiple of C):
///   O_c = scale Q_c S + tril_incl(scale Q_c K_c^T) V_c,    S <- S + K_c^T V_c
#pragma once
#include "reference/types.h"

namespace statecut::ref {

HeadResult linear_attention_recurrent(const Mat& q, const Mat& k, const Mat& v, double scale,
                                      const Mat* S0 = nullptr);
HeadResult linear_attention_chunked(const Mat& q, const Mat& k, const Mat& v, double scale, const Mat* S0 = nullptr,
                                    Index chunk = 64);

}  // namespace statecut::ref
