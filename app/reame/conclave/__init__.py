"""The Conclave: best-of-N candidates decoded together, their answers put to a vote."""
