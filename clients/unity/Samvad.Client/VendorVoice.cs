// The vendor's voice on the headset: queues `reply.audio` chunks and hands out samples to whatever
// plays them (in Unity, an AudioSource's streaming clip or OnAudioFilterRead; see
// Samvad.Unity/SamvadVoice.cs), and knows how much of the reply's text has been heard.
//   BargeIn()   the learner talks over Ramesh: stop now, drop the rest, report `playback`
//               with interrupted = true and the characters heard (docs/protocol.md, barge-in).
//   finished    a turn reply played to its end is reported with interrupted = false.
// A `reply.withdrawn` drops the turn's audio; the replacement reply is spoken afresh. A `heard` with
// interrupted = true for the turn playing (the server decided a barge-in on the open microphone)
// stops it too. A thinking sound (`filler`, sentence -1, no text) plays before its reply and adds
// no characters to what was heard; one still waiting when the reply's own audio comes is dropped.

using System;
using System.Collections.Generic;

namespace Samvad.Client
{
    public sealed class VendorVoice
    {
        sealed class Sentence
        {
            public int Index;
            public string Text = "";
            public readonly List<float> Samples = new List<float>();
            public readonly VisemeTimeline Visemes = new VisemeTimeline();
            public bool Complete;
            public bool Filler;
        }

        readonly SamvadClient _client;
        readonly object _gate = new object();
        readonly Queue<Sentence> _queue = new Queue<Sentence>();
        Sentence _playing;
        int _position;          // samples of _playing already played
        int _turn = -1;         // the turn being spoken
        int _charsBefore;       // characters of the sentences of _turn already played
        bool _final;            // the last chunk of _turn has arrived
        int _cutTurn = -1;      // the turn the learner barged in on: its chunks still in flight are dropped
        readonly Dictionary<int, ReplyEvent> _replies = new Dictionary<int, ReplyEvent>();

        public VendorVoice(SamvadClient client)
        {
            _client = client;
            client.ReplyAudio += OnAudio;
            client.ReplyWithdrawn += w => { lock (_gate) { if (w.Turn == _turn) ClearLocked(); if (w.Turn == _cutTurn) _cutTurn = -1; } };
            client.Reply += r => { lock (_gate) { _replies[r.Turn] = r; } };
            client.Heard += h => { if (h.Interrupted) lock (_gate) { if (h.Turn == _turn) { _cutTurn = _turn; ClearLocked(); } } };
            ReportWhenFinished = true;
        }

        /// <summary>Samples per second of what <see cref="Read"/> returns (the synthesizer's rate).</summary>
        public int SampleRate { get; private set; }
        /// <summary>True while there is vendor audio to play.</summary>
        public bool Speaking { get { lock (_gate) { return _playing != null || _queue.Count > 0; } } }
        public int Turn { get { lock (_gate) { return _turn; } } }
        /// <summary>Chunks received (statistics).</summary>
        public int Chunks { get; private set; }
        /// <summary>True when synthesis failed for the current reply: show its text instead.</summary>
        public bool Degraded { get; private set; }
        /// <summary>Report `playback` (interrupted = false) when a turn reply has played to its end.</summary>
        public bool ReportWhenFinished { get; set; }
        /// <summary>The client asked for visemes (the default): a chunk of sound without them is a violation.</summary>
        public bool WantVisemes { get; set; } = true;
        /// <summary>Chunks whose visemes were missing or broke the wire's rules (0 from a conforming server).</summary>
        public int VisemeViolations { get; private set; }

        /// <summary>The viseme (0-14) showing <paramref name="leadSamples"/> after the sample being played:
        /// the audio's own clock, advanced by <see cref="Read"/> on the audio thread. A lead of a few
        /// tens of ms lets the mouth start a shape as the sound starts.</summary>
        public int VisemeAt(int leadSamples)
        {
            lock (_gate)
            {
                Sentence s; long at;
                return Locate(leadSamples, out s, out at) ? s.Visemes.At(at) : 0;
            }
        }

        /// <summary>Blendshape weights (15, 0-1) for the sample being played plus the lead; see
        /// <see cref="VisemeTimeline.Weights"/>.</summary>
        public void VisemeWeights(float[] weights, int leadSamples, int blendSamples)
        {
            lock (_gate)
            {
                Sentence s; long at;
                if (Locate(leadSamples, out s, out at)) { s.Visemes.Weights(weights, at, blendSamples); return; }
            }
            Array.Clear(weights, 0, VisemeTimeline.Count);
            weights[0] = 1f;
        }

        bool Locate(int leadSamples, out Sentence sentence, out long at)
        {
            sentence = _playing;
            at = _position + Math.Max(0, leadSamples);
            if (sentence == null) return false;
            if (at >= sentence.Samples.Count && sentence.Complete)
            {
                foreach (var next in _queue)  // the lead reaches into the next sentence
                {
                    at -= sentence.Samples.Count;
                    sentence = next;
                    break;
                }
            }
            return true;
        }

        void OnAudio(ReplyAudioEvent a)
        {
            lock (_gate)
            {
                Chunks++;
                if (a.Turn == _cutTurn) return;
                if (a.Turn != _turn)
                {
                    ClearLocked();
                    _turn = a.Turn;
                    Degraded = false;
                }
                if (a.Degraded) Degraded = true;
                SampleRate = a.SampleRate;
                if (!a.Filler) DropWaitingFillersLocked();
                Sentence s = _playing != null && _playing.Index == a.Sentence ? _playing : null;
                if (s == null)
                {
                    foreach (var q in _queue) if (q.Index == a.Sentence) s = q;
                }
                if (s == null)
                {
                    s = new Sentence { Index = a.Sentence, Filler = a.Filler };
                    _queue.Enqueue(s);
                }
                if (!string.IsNullOrEmpty(a.Text)) s.Text = a.Text;
                byte[] pcm = a.Pcm;
                if (!a.Degraded && (pcm.Length > 0 || a.Visemes != null))
                {
                    int before = s.Visemes.Violations;
                    s.Visemes.Add(s.Samples.Count, a.Visemes, a.SampleRate, pcm.Length > 0 && WantVisemes);
                    VisemeViolations += s.Visemes.Violations - before;
                }
                for (int i = 0; i + 1 < pcm.Length; i += 2)
                {
                    s.Samples.Add((short)(pcm[i] | (pcm[i + 1] << 8)) / 32768f);
                }
                if (a.Last) s.Complete = true;
                if (a.Final) _final = true;
            }
        }

        /// <summary>Fill <paramref name="buffer"/> with the next samples (silence when there are none);
        /// returns how many were vendor audio. Call it from the audio thread.</summary>
        public int Read(float[] buffer, int offset, int count)
        {
            int written = 0;
            bool finished = false;
            int turn;
            lock (_gate)
            {
                while (written < count)
                {
                    if (_playing == null)
                    {
                        if (_queue.Count == 0) break;
                        _playing = _queue.Dequeue();
                        _position = 0;
                    }
                    int available = _playing.Samples.Count - _position;
                    if (available <= 0)
                    {
                        if (!_playing.Complete) break;  // the rest of the sentence is on its way
                        _charsBefore += _playing.Text.Length + (_playing.Text.Length > 0 ? 1 : 0);
                        _playing = null;
                        if (_queue.Count == 0 && _final) { finished = true; _final = false; }
                        continue;
                    }
                    int n = Math.Min(available, count - written);
                    _playing.Samples.CopyTo(_position, buffer, offset + written, n);
                    _position += n;
                    written += n;
                }
                turn = _turn;
            }
            for (int i = written; i < count; i++) buffer[offset + i] = 0f;
            if (finished && ReportWhenFinished) ReportHeard(turn, int.MaxValue, false);
            return written;
        }

        /// <summary>Characters of the reply's text heard so far (whole sentences, plus the played share
        /// of the one playing).</summary>
        public int HeardChars
        {
            get
            {
                lock (_gate)
                {
                    int chars = _charsBefore;
                    if (_playing != null && _playing.Samples.Count > 0)
                    {
                        chars += (int)((long)_playing.Text.Length * _position / _playing.Samples.Count);
                    }
                    return chars;
                }
            }
        }

        /// <summary>The learner cut in: stop at once, drop the rest of the reply and tell the server how
        /// much was heard. Null when nothing was playing (or the reply was not a turn).</summary>
        public PendingFrame BargeIn()
        {
            int turn, heard;
            lock (_gate)
            {
                if (_turn < 0 || (_playing == null && _queue.Count == 0)) return null;
                heard = HeardChars;
                turn = _turn;
                _cutTurn = turn;
                ClearLocked();
            }
            return ReportHeard(turn, heard, true);
        }

        PendingFrame ReportHeard(int turn, int heard, bool interrupted)
        {
            ReplyEvent reply;
            lock (_gate)
            {
                if (!_replies.TryGetValue(turn, out reply)) return null;
            }
            if (reply.Mark != null) return null;  // only a turn's reply is reported
            int length = reply.Text == null ? 0 : reply.Text.Length;
            return _client.ReportPlayback(turn, Math.Min(heard, length), interrupted);
        }

        void DropWaitingFillersLocked()
        {
            bool any = false;
            foreach (var q in _queue) any |= q.Filler;
            if (!any) return;
            var keep = new List<Sentence>(_queue);
            _queue.Clear();
            foreach (var q in keep) if (!q.Filler) _queue.Enqueue(q);
        }

        void ClearLocked()
        {
            _queue.Clear();
            _playing = null;
            _position = 0;
            _charsBefore = 0;
            _final = false;
        }
    }
}
