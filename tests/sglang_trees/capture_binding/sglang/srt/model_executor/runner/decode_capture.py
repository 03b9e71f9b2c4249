def capture_one(attn_backend, forward_batch):
    attn_backend.init_forward_metadata_out_graph(forward_batch, in_capture=True)
