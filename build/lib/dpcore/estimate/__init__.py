"""Post-processing shared by the kinds of data: tree least squares, the exact tree DP, IntOpt, wavelets, the matrix mechanism."""
