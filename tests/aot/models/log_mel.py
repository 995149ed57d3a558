"""A model file for `shimkit compile`: an audio front end (a centred STFT's power through a
mel filterbank, a log, a convolution), whose FFT and complex values compile rewrites for
the slim targets (tests/aot/test_fft_math_form.py)."""

import torch

torch.manual_seed(11)


class LogMel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(64))
        self.register_buffer("mel", torch.rand(33, 16) / 8)
        self.conv = torch.nn.Conv1d(16, 8, 3, padding=1)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(wav, 64, 16, window=self.window, return_complex=True)
        mel = torch.log(spec.abs().pow(2).transpose(1, 2) @ self.mel + 1e-6)
        return self.conv(mel.transpose(1, 2))


model = LogMel().eval()
example_inputs = (torch.randn(2, 1024),)
