"""Privacy accounting: noise (the only randomness), costs and conversions, budget split and calibration, the ledger."""
