"""Result fingerprints of every reference algorithm, kept bit-identical across refactors.

``cases.py`` lists the cases, ``record.py`` computes a case's fingerprint and reads and writes the
fixture ``fingerprints.json``; ``tests/test_fingerprints.py`` recomputes every case and compares.
"""
