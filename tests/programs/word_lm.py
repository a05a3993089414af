"""A word-level language model in the shape of the classic word-language-model example
(Embedding -> multi-layer LSTM/GRU -> Linear decoder, optional weight tying, truncated
backpropagation through time, a hand-written SGD update with gradient clipping),
trained on a synthetic corpus made with NumPy (no download).

The corpus is text from a random sparse Markov chain over a small vocabulary (each word is
followed by one of a few likely words), so the next word is predictable and the loss can
fall well below log(vocabulary size).

Besides the usual options, it keeps the contract of ``tests/programs/harness.py``:
``--steps N`` (stop after N updates, printing ``loss <step> <value>`` for each),
``--dump-init PATH`` and ``--init PATH``. Pass ``--dropout 0`` to compare runs: the dropout
masks come from the framework's random stream, which differs between frameworks.
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


###############################################################################
# Data
###############################################################################

class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class SyntheticCorpus(object):
    """Train/valid/test "text" drawn from a sparse Markov chain over ``vocab`` words."""

    def __init__(self, vocab, lengths, seed, branching=3):
        rng = np.random.default_rng(seed)
        self.dictionary = Dictionary()
        words = ['<eos>'] + ['w%d' % i for i in range(vocab - 1)]
        successors = rng.integers(0, vocab, size=(vocab, branching))
        probs = rng.dirichlet(np.ones(branching), size=vocab)
        self.train, self.valid, self.test = (self.tokenize(self.sample(n, words, successors, probs, rng))
                                             for n in lengths)

    @staticmethod
    def sample(n, words, successors, probs, rng):
        state = 0
        out = []
        for _ in range(n):
            state = successors[state, rng.choice(len(probs[state]), p=probs[state])]
            out.append(words[state])
        return out

    def tokenize(self, words):
        ids = [self.dictionary.add_word(w) for w in words]
        return torch.from_numpy(np.array(ids, dtype=np.int64))


###############################################################################
# Model
###############################################################################

class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ['LSTM', 'GRU']:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            raise ValueError("An invalid option for `--model` was supplied, options are ['LSTM', 'GRU']")
        self.decoder = nn.Linear(nhid, ntoken)

        # Optionally tie weights as in "Using the Output Embedding to Improve Language
        # Models" (Press & Wolf 2016) and "Tying Word Vectors and Word Classifiers"
        # (Inan et al. 2016).
        if tie_weights:
            if nhid != ninp:
                raise ValueError('When using the tied flag, nhid must be equal to emsize')
            self.decoder.weight = self.encoder.weight

        self.init_weights()

        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        else:
            return weight.new_zeros(self.nlayers, bsz, self.nhid)


###############################################################################
# Training code
###############################################################################

def batchify(data, bsz, device):
    # Work out how cleanly we can divide the dataset into bsz parts.
    nbatch = data.size(0) // bsz
    # Trim off any extra elements that wouldn't cleanly fit (remainders).
    data = data.narrow(0, 0, nbatch * bsz)
    # Evenly divide the data across the bsz batches.
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def evaluate(model, criterion, data_source, eval_batch_size, bptt):
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train(args, model, criterion, train_data, lr, epoch, step):
    """One epoch (or until ``args.steps`` updates in all); returns the step count."""
    # Turn on training mode which enables dropout.
    model.train()
    total_loss = 0.
    start_time = time.time()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        if step >= args.steps:
            break
        data, targets = get_batch(train_data, i, args.bptt)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        # If we didn't, the model would try backpropagating all the way to start of the dataset.
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()

        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)

        print(f"loss {step} {loss.item():.8f}")
        step += 1
        total_loss += loss.item()

        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start_time
            print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | '
                  'loss {:5.2f} | ppl {:8.2f}'.format(
                      epoch, batch, len(train_data) // args.bptt, lr,
                      elapsed * 1000 / args.log_interval, cur_loss, math.exp(cur_loss)))
            total_loss = 0
            start_time = time.time()
        if args.dry_run:
            break
    return step


def main():
    parser = argparse.ArgumentParser(description='Synthetic-corpus RNN/LSTM language model')
    parser.add_argument('--model', type=str, default='LSTM',
                        help='type of network (LSTM, GRU)')
    parser.add_argument('--vocab', type=int, default=64,
                        help='size of the synthetic vocabulary')
    parser.add_argument('--corpus-words', type=int, default=6000,
                        help='number of words in the synthetic training text')
    parser.add_argument('--emsize', type=int, default=32,
                        help='size of word embeddings')
    parser.add_argument('--nhid', type=int, default=32,
                        help='number of hidden units per layer')
    parser.add_argument('--nlayers', type=int, default=2,
                        help='number of layers')
    parser.add_argument('--lr', type=float, default=20,
                        help='initial learning rate')
    parser.add_argument('--clip', type=float, default=0.25,
                        help='gradient clipping')
    parser.add_argument('--epochs', type=int, default=3,
                        help='upper epoch limit')
    parser.add_argument('--steps', type=int, default=None,
                        help='stop after N updates in all (default: the whole epochs)')
    parser.add_argument('--batch_size', '--batch-size', type=int, default=16, metavar='N',
                        help='batch size')
    parser.add_argument('--bptt', type=int, default=20,
                        help='sequence length')
    parser.add_argument('--dropout', type=float, default=0.2,
                        help='dropout applied to layers (0 = no dropout)')
    parser.add_argument('--tied', action='store_true',
                        help='tie the word embedding and softmax weights')
    parser.add_argument('--seed', type=int, default=1111,
                        help='random seed')
    parser.add_argument('--no-accel', action='store_true',
                        help='disables accelerator')
    parser.add_argument('--log-interval', type=int, default=20, metavar='N',
                        help='report interval')
    parser.add_argument('--dry-run', action='store_true',
                        help='verify the code and the model')
    parser.add_argument('--dump-init', metavar='PATH', help='save the initial state_dict with numpy.savez')
    parser.add_argument('--init', metavar='PATH', help='load the initial state_dict from a numpy .npz')
    args = parser.parse_args()

    # Set the random seed manually for reproducibility.
    torch.manual_seed(args.seed)

    use_accel = not args.no_accel and torch.accelerator.is_available()
    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    ###########################################################################
    # Load data
    ###########################################################################

    corpus = SyntheticCorpus(args.vocab, (args.corpus_words, args.corpus_words // 10, args.corpus_words // 10),
                             seed=args.seed)

    eval_batch_size = 10
    train_data = batchify(corpus.train, args.batch_size, device)
    val_data = batchify(corpus.valid, eval_batch_size, device)
    test_data = batchify(corpus.test, eval_batch_size, device)

    ###########################################################################
    # Build the model
    ###########################################################################

    ntokens = len(corpus.dictionary)
    model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})
    if args.dump_init:
        np.savez(args.dump_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})

    criterion = nn.NLLLoss()

    ###########################################################################
    # Training
    ###########################################################################

    if args.steps is None:
        args.steps = args.epochs * len(range(0, train_data.size(0) - 1, args.bptt))
    lr = args.lr
    best_val_loss = None
    step = 0
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        step = train(args, model, criterion, train_data, lr, epoch, step)
        val_loss = evaluate(model, criterion, val_data, eval_batch_size, args.bptt)
        print('-' * 89)
        print('| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | '
              'valid ppl {:8.2f}'.format(epoch, (time.time() - epoch_start_time), val_loss, math.exp(val_loss)))
        print('-' * 89)
        if not best_val_loss or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            # Anneal the learning rate if no improvement has been seen in the validation dataset.
            lr /= 4.0
        if step >= args.steps:
            break

    # Run on test data.
    test_loss = evaluate(model, criterion, test_data, eval_batch_size, args.bptt)
    print('=' * 89)
    print('| End of training | test loss {:5.2f} | test ppl {:8.2f}'.format(test_loss, math.exp(test_loss)))
    print('=' * 89)


if __name__ == '__main__':
    main()
