using System.Collections.Generic;
using Samvad.Client;

namespace Samvad.Harness
{
    /// <summary>Everything one client saw, recorded from its events (raised on its receive thread).</summary>
    sealed class Recorder
    {
        readonly object _gate = new object();
        public readonly List<long> AppliedSeqs = new List<long>();
        public readonly List<ReplyEvent> Replies = new List<ReplyEvent>();
        public readonly List<string> Errors = new List<string>();
        public readonly List<TipsEvent> Tips = new List<TipsEvent>();
        public readonly List<HintEvent> Hints = new List<HintEvent>();
        public readonly List<HeardEvent> Heard = new List<HeardEvent>();
        public readonly List<UndoEvent> Undos = new List<UndoEvent>();
        public readonly List<ReplyEvent> Nudges = new List<ReplyEvent>();
        public readonly List<string> ErrorCodesSeen = new List<string>();
        public int Repeats;
        public long WelcomeSeq = -1;
        public int Disconnects;
        public int ReconnectAttempts;
        public int Connects;
        public int Deltas;
        public SessionEndedEvent Ended;
        public LearnerReport Report;

        public void Attach(SamvadClient client)
        {
            client.Connected += w => { lock (_gate) { if (WelcomeSeq < 0) WelcomeSeq = w.Seq; Connects++; } };
            client.Disconnected += d => { lock (_gate) Disconnects++; };
            client.Reconnecting += r => { lock (_gate) ReconnectAttempts++; };
            client.Reply += r => { lock (_gate) { AppliedSeqs.Add(r.Seq); Replies.Add(r); } };
            client.ReplyDelta += d => { lock (_gate) Deltas++; };
            client.Mood += m => { lock (_gate) AppliedSeqs.Add(m.Seq); };
            client.Stage += s => { lock (_gate) AppliedSeqs.Add(s.Seq); };
            client.SessionEnded += e => { lock (_gate) { AppliedSeqs.Add(e.Seq); Ended = e; } };
            client.Tips += t => { lock (_gate) { AppliedSeqs.Add(t.Seq); Tips.Add(t); } };
            client.Report += r => { lock (_gate) { AppliedSeqs.Add(r.Seq); Report = r.Report; } };
            client.Repeated += r => { lock (_gate) { AppliedSeqs.Add(r.Seq); Repeats++; } };
            client.HintReceived += h => { lock (_gate) { AppliedSeqs.Add(h.Seq); Hints.Add(h); } };
            client.Heard += h => { lock (_gate) { AppliedSeqs.Add(h.Seq); Heard.Add(h); } };
            client.Undone += u => { lock (_gate) { AppliedSeqs.Add(u.Seq); Undos.Add(u); } };
            client.NudgeReceived += n => { lock (_gate) Nudges.Add(n); }; // its seq is the Reply's
            client.Snapshot += s => { lock (_gate) Errors.Add("unexpected snapshot at seq " + s.Seq + ": " + s.Reason); };
            client.Error += e => { lock (_gate) { Errors.Add(e.Code + ": " + e.Message + " (id " + e.Id + ")"); ErrorCodesSeen.Add(e.Code); } };
        }

        public List<long> Seqs() { lock (_gate) return new List<long>(AppliedSeqs); }
        public List<ReplyEvent> RepliesCopy() { lock (_gate) return new List<ReplyEvent>(Replies); }
        public List<string> ErrorsCopy() { lock (_gate) return new List<string>(Errors); }
        public List<TipsEvent> TipsCopy() { lock (_gate) return new List<TipsEvent>(Tips); }
        public List<HintEvent> HintsCopy() { lock (_gate) return new List<HintEvent>(Hints); }
        public List<HeardEvent> HeardCopy() { lock (_gate) return new List<HeardEvent>(Heard); }
        public List<UndoEvent> UndosCopy() { lock (_gate) return new List<UndoEvent>(Undos); }
        public List<ReplyEvent> NudgesCopy() { lock (_gate) return new List<ReplyEvent>(Nudges); }
        public List<string> ErrorCodesCopy() { lock (_gate) return new List<string>(ErrorCodesSeen); }

        /// <summary>True when the applied seqs run welcome.seq+1, +2, ... with no hole and no repeat.</summary>
        public bool Contiguous(out string problem)
        {
            lock (_gate)
            {
                long expected = WelcomeSeq + 1;
                foreach (long seq in AppliedSeqs)
                {
                    if (seq != expected)
                    {
                        problem = "applied seq " + seq + " where " + expected + " was due";
                        return false;
                    }
                    expected++;
                }
                problem = null;
                return true;
            }
        }
    }
}
