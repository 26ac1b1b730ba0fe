"""Speculative decoding: the drafters (context lookup, the Palimpsest archive, Il Suggeritore, a
draft model), verification of their drafts, and the controller that measures whether they pay;
kit.py is what the engine holds of it all."""
