"""How a stored state is made: JSON transcoding, compression, cipher, hash chain."""
