import torch


class ReqToTokenPool:
    def __init__(self, size, device):
        self.req_to_token = torch.zeros((size, 8), dtype=torch.int32, device=device)

    def write(self, indices, values):
        self.req_to_token[indices] = values
