def gather_pages(pool, rows, seq_lens):
    """Looks up the pages of ``rows`` in the request-to-token map."""
    return pool.req_to_token[rows, :seq_lens]
