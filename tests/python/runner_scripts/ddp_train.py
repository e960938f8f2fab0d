"""A plain DDP training loop (gloo, CPU), not instrumented: `gpuscope run`
under torchrun must give each rank its own files."""

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(40, 16), torch.randn(40, 1))
    for x, y in torch.utils.data.DataLoader(data, batch_size=4):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
