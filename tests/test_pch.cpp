// Compiles tests/test_pch.h once (statecut_test_pch); every LibTorch test reuses it.
