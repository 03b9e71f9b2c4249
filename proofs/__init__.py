"""proofs"""
