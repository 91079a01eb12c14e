// Console harness for Samvad.Client: plays a whole negotiation against a live server, breaking the
// connection twice on purpose, and proves that nothing was lost or applied twice.
//
//   mono clients/unity/bin/Harness.exe --url http://127.0.0.1:8000 [--timeout 45] [--verbose]
//
// Drop 1 aborts the socket right after a transcript is queued: the frame may or may not have reached
// the server, and either way it must be answered exactly once. Drop 2 first makes the client deaf
// (incoming frames are thrown away, as if lost in the network), waits until the server has applied
// the transcript and answered it, then aborts: the reply must come back through `resume` and the
// re-sent transcript must be acknowledged as a duplicate.
//
// Prints one JSON line (the summary) on stdout; exit code 0 when every check passed.

using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;
using Samvad.Client;

namespace Samvad.Harness
{
    public static class Program
    {
        public static int Main(string[] args)
        {
            string url = null;
            int timeoutSeconds = 45;
            bool verbose = false;
            for (int i = 0; i < args.Length; i++)
            {
                switch (args[i])
                {
                    case "--url":
                        url = i + 1 < args.Length ? args[++i] : null;
                        break;
                    case "--timeout":
                        timeoutSeconds = int.Parse(args[++i]);
                        break;
                    case "--verbose":
                        verbose = true;
                        break;
                    default:
                        Console.Error.WriteLine("unknown argument " + args[i]);
                        return 2;
                }
            }
            if (string.IsNullOrEmpty(url))
            {
                Console.Error.WriteLine("usage: mono Harness.exe --url http://127.0.0.1:PORT [--timeout S] [--verbose]");
                return 2;
            }
            var run = new Run(url, verbose);
            JObject summary;
            try
            {
                var work = run.ExecuteAsync();
                if (!work.Wait(TimeSpan.FromSeconds(timeoutSeconds)))
                {
                    run.Fail("the harness did not finish within " + timeoutSeconds + " s");
                }
            }
            catch (AggregateException ex)
            {
                run.Fail("unexpected " + ex.InnerException.GetType().Name + ": " + ex.InnerException.Message);
                if (verbose) Console.Error.WriteLine(ex.InnerException);
            }
            summary = run.Summary();
            Console.WriteLine(summary.ToString(Formatting.None));
            return (bool)summary["ok"] ? 0 : 1;
        }
    }

    /// <summary>The `polite` persona of clients/bots/personas.py, in C#: greets, asks the price, opens
    /// near 30 % of the first quote, comes up 7 % a turn, and shakes when the prices meet.</summary>
    sealed class PoliteLearner
    {
        const double Open = 0.30, Step = 0.07, Limit = 0.55;
        int _lines;
        int? _firstQuote;

        public string Next(ReplyEvent last)
        {
            if (!_firstQuote.HasValue && last != null && last.CounterPrice.HasValue)
            {
                _firstQuote = last.CounterPrice;
            }
            string line = Line(last);
            _lines++;
            return line;
        }

        string Line(ReplyEvent last)
        {
            if (_lines == 0) return "Namaste bhaiya! Aap kaise ho?";
            if (!_firstQuote.HasValue || last == null || !last.CounterPrice.HasValue)
            {
                return "Bhaiya, ye tamatar kitne ka hai?";
            }
            int counter = last.CounterPrice.Value;
            int planned = Share(Math.Min(Limit, Open + Step * Math.Max(0, _lines - 2)));
            if (counter <= Math.Max(planned, Share(0.5)) || _lines >= 12)
            {
                return "Theek hai bhaiya, pakka!";
            }
            string[] options =
            {
                "Bahut mehenga hai, bhaiya. {0} mein de do?",
                "Thoda kam karo na bhaiya, {0} rupaye?",
                "Bhaiya, aapke tamatar bahut fresh hain, par {0} mein de do, please.",
                "Do kilo le raha hoon bhaiya, {0} mein doge?",
            };
            return string.Format(options[_lines % options.Length], planned);
        }

        int Share(double fraction)
        {
            double value = _firstQuote.Value * fraction;
            // Python's round() rounds halves to even, and so does Math.Round by default.
            return value >= 50 ? 5 * (int)Math.Round(value / 5) : Math.Max(1, (int)Math.Round(value));
        }
    }

    /// <summary>Everything one client saw, recorded from its events (raised on its receive thread).</summary>
    sealed class Recorder
    {
        readonly object _gate = new object();
        public readonly List<long> AppliedSeqs = new List<long>();
        public readonly List<ReplyEvent> Replies = new List<ReplyEvent>();
        public readonly List<string> Errors = new List<string>();
        public long WelcomeSeq = -1;
        public int Disconnects;
        public int ReconnectAttempts;
        public int Connects;
        public int Deltas;
        public SessionEndedEvent Ended;

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
            client.Snapshot += s => { lock (_gate) Errors.Add("unexpected snapshot at seq " + s.Seq + ": " + s.Reason); };
            client.Error += e => { lock (_gate) Errors.Add(e.Code + ": " + e.Message + " (id " + e.Id + ")"); };
        }


        public List<long> Seqs() { lock (_gate) return new List<long>(AppliedSeqs); }
        public List<ReplyEvent> RepliesCopy() { lock (_gate) return new List<ReplyEvent>(Replies); }
        public List<string> ErrorsCopy() { lock (_gate) return new List<string>(Errors); }

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

    sealed class Run
    {
        static readonly TimeSpan Step = TimeSpan.FromSeconds(15);

        readonly string _url;
        readonly bool _verbose;
        readonly List<string> _failures = new List<string>();
        readonly JObject _facts = new JObject();
        readonly object _gate = new object();

        public Run(string url, bool verbose)
        {
            _url = url;
            _verbose = verbose;
        }

        public void Fail(string why)
        {
            lock (_gate) _failures.Add(why);
            Log("FAIL " + why);
        }

        void Check(bool ok, string why)
        {
            if (!ok) Fail(why);
        }

        void Log(string line)
        {
            if (_verbose) Console.Error.WriteLine("[harness] " + line);
        }

        public JObject Summary()
        {
            lock (_gate)
            {
                var summary = new JObject();
                summary["ok"] = _failures.Count == 0;
                foreach (var fact in _facts) summary[fact.Key] = fact.Value;
                summary["failures"] = new JArray(_failures.ToArray());
                return summary;
            }
        }

        void Fact(string key, JToken value)
        {
            lock (_gate) _facts[key] = value;
        }

        SamvadClientOptions Options(bool tokenInQuery)
        {
            return new SamvadClientOptions
            {
                TokenInQuery = tokenInQuery,
                InitialReconnectDelay = TimeSpan.FromMilliseconds(150),
                MaxReconnectDelay = TimeSpan.FromSeconds(2),
                KeepAliveInterval = TimeSpan.FromSeconds(2),
                SilenceTimeout = TimeSpan.FromSeconds(20),
                RandomSeed = 7,
                Log = _verbose ? (Action<string>)(line => Console.Error.WriteLine(line)) : null,
            };
        }

        static async Task<T> Within<T>(Task<T> task, TimeSpan limit, string what)
        {
            if (await Task.WhenAny(task, Task.Delay(limit)).ConfigureAwait(false) != task)
            {
                throw new TimeoutException(what + " took longer than " + limit.TotalSeconds + " s");
            }
            return await task.ConfigureAwait(false);
        }

        /// <summary>The parts that need no server: the seq rules of protocol §5, the close-code policy, ids.</summary>
        void CheckOffline()
        {
            var seq = new SeqTracker();
            Check(seq.Start(4) && !seq.Start(9) && seq.LastSeq == 4, "SeqTracker: a later welcome moved last_seq");
            Check(seq.Offer("reply", 5) == SeqDecision.Apply && seq.LastSeq == 5, "SeqTracker: seq last+1 not applied");
            Check(seq.Offer("mood", 5) == SeqDecision.DropStale, "SeqTracker: a repeated seq was not dropped");
            Check(seq.Offer("mood", 3) == SeqDecision.DropStale, "SeqTracker: an old seq was not dropped");
            Check(seq.Offer("reply", 8) == SeqDecision.DropGapAndResume && seq.ResumeOutstanding,
                  "SeqTracker: a gap did not ask for resume");
            Check(seq.Offer("reply", 9) == SeqDecision.DropGap, "SeqTracker: a gap during a resume was not dropped");
            Check(seq.Offer("stage", 6) == SeqDecision.Apply && seq.LastSeq == 6, "SeqTracker: the replay was not applied");
            Check(seq.Offer("snapshot", 12) == SeqDecision.ApplySnapshot && seq.LastSeq == 12,
                  "SeqTracker: a snapshot did not move last_seq to its seq");
            Check(seq.Offer("reply", 13) == SeqDecision.Apply, "SeqTracker: the event after a snapshot was not applied");
            Check(seq.Offer("snapshot", 11) == SeqDecision.DropStale, "SeqTracker: an older snapshot was applied");
            foreach (int code in new[] { 4401, 4403, 4404, 4409 })
            {
                Check(!SamvadClient.MayReconnect(code), "the client would reconnect after " + code);
            }
            foreach (int code in new[] { 1001, 1006, 4408, 4410, 4429, 4430 })
            {
                Check(SamvadClient.MayReconnect(code), "the client would not reconnect after " + code);
            }
            Check(SamvadClient.MayReconnect(null), "the client would not reconnect after a network drop");
            string id = SamvadClient.NewId("transcript");
            Check(id.Length <= 64 && id.All(c => c > ' ' && c <= '~'), "NewId made an invalid id: " + id);
        }

        public async Task ExecuteAsync()
        {
            CheckOffline();
            using (var api = new SamvadApi(_url))
            {
                var info = await api.CreateSessionAsync(new CreateSessionRequest { LearnerId = "unity-harness" })
                                    .ConfigureAwait(false);
                Fact("session_id", info.SessionId);
                Log("session " + info.SessionId);

                await CheckRefusedAsync(info).ConfigureAwait(false);

                var player = new SamvadClient(_url, info.SessionId, info.PlayerToken, Options(false));
                var spectator = new SamvadClient(_url, info.SessionId, info.SpectatorToken, Options(true));
                var seen = new Recorder();
                var watched = new Recorder();
                seen.Attach(player);
                watched.Attach(spectator);
                try
                {
                    var welcome = await Within(player.ConnectAsync(), Step, "connecting the player").ConfigureAwait(false);
                    Check(welcome.Role == "player", "player welcome role was " + welcome.Role);
                    var spectatorWelcome = await Within(spectator.ConnectAsync(), Step, "connecting the spectator")
                                                 .ConfigureAwait(false);
                    Check(spectatorWelcome.Role == "spectator", "spectator welcome role was " + spectatorWelcome.Role);

                    var pong = await Within(player.PingAsync(), Step, "ping").ConfigureAwait(false);
                    Fact("rtt_ms", pong.RttMs.HasValue ? (JToken)pong.RttMs.Value : JValue.CreateNull());
                    Check(pong.RttMs.HasValue && pong.RttMs.Value >= 0, "the pong carried no usable RTT");

                    var scene = player.SendScene("Tomato");
                    var sceneAck = await Within(scene.Acked, Step, "the scene ack").ConfigureAwait(false);
                    Check(!sceneAck.Duplicate, "the first scene frame was acked as a duplicate");

                    // A spectator may not speak: the frame is refused for good, not retried.
                    var intruder = spectator.SendTranscript("I am only watching");
                    try
                    {
                        await Within(intruder.Acked, Step, "the spectator's refusal").ConfigureAwait(false);
                        Fail("a spectator's transcript was accepted");
                    }
                    catch (SamvadFrameRejectedException ex)
                    {
                        Check(ex.Error.Code == ErrorCodes.Forbidden, "spectator transcript refused with " + ex.Error.Code);
                    }

                    await NegotiateAsync(api, info, player, seen).ConfigureAwait(false);

                    // The spectator must end up with exactly the same stream.
                    var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(5);
                    while (spectator.LastSeq < player.LastSeq && DateTime.UtcNow < deadline)
                    {
                        await Task.Delay(50).ConfigureAwait(false);
                    }
                    string problem;
                    Check(watched.Contiguous(out problem), "spectator: " + problem);
                    Check(spectator.LastSeq == player.LastSeq,
                          "spectator ended at seq " + spectator.LastSeq + ", player at " + player.LastSeq);
                    Fact("spectator", new JObject
                    {
                        { "last_seq", spectator.LastSeq },
                        { "replies", watched.RepliesCopy().Count },
                        { "outcome", watched.Ended != null ? watched.Ended.Outcome : null },
                    });
                }
                finally
                {
                    await player.CloseAsync().ConfigureAwait(false);
                    await spectator.CloseAsync().ConfigureAwait(false);
                    player.Dispose();
                    spectator.Dispose();
                }
            }
        }

        /// <summary>A bad token is refused with 4401 and the client does not retry it.</summary>
        async Task CheckRefusedAsync(SessionInfo info)
        {
            var stranger = new SamvadClient(_url, info.SessionId, "not-a-token", Options(false));
            var recorder = new Recorder();
            recorder.Attach(stranger);
            int? code = null;
            try
            {
                await Within(stranger.ConnectAsync(), Step, "the refusal of a bad token").ConfigureAwait(false);
                Fail("a bad token was welcomed");
            }
            catch (SamvadClosedException ex)
            {
                code = ex.CloseCode;
            }
            await Task.Delay(300).ConfigureAwait(false); // a wrong client would be retrying by now
            Check(code == CloseCodes.Unauthorized, "bad token closed with " + code + ", expected 4401");
            Check(recorder.ReconnectAttempts == 0, "the client retried after 4401");
            Fact("refused_bad_token", code.HasValue ? (JToken)code.Value : JValue.CreateNull());
            stranger.Dispose();
        }

        async Task NegotiateAsync(SamvadApi api, SessionInfo info, SamvadClient player, Recorder seen)
        {
            var learner = new PoliteLearner();
            var sent = new List<PendingFrame>();
            var replyFor = new Dictionary<string, ReplyEvent>();
            ReplyEvent last = null;
            PendingFrame deafFrame = null;
            PendingFrame droppedFrame = null;
            for (int turn = 1; turn <= 14; turn++)
            {
                string line = learner.Next(last);
                Log("turn " + turn + " learner: " + line);
                PendingFrame frame;
                if (turn == 2)
                {
                    // Drop 1: the socket dies right behind the transcript.
                    frame = player.SendTranscript(line, 0.93, "hi-EN");
                    player.ForceDrop();
                    droppedFrame = frame;
                }
                else if (turn == 3)
                {
                    frame = await DeafDropAsync(api, info, player, seen, line, turn).ConfigureAwait(false);
                    deafFrame = frame;
                }
                else
                {
                    frame = player.SendTranscript(line, 0.95, "hi-EN");
                }
                sent.Add(frame);
                var reply = await Within(frame.Reply, Step, "the reply to turn " + turn).ConfigureAwait(false);
                await Within(frame.Acked, Step, "the ack of turn " + turn).ConfigureAwait(false);
                replyFor[frame.Id] = reply;
                last = reply;
                Log(string.Format("turn {0} vendor: {1} | {2} happiness {3} quote {4}", reply.Turn, reply.Text,
                                  reply.NegotiationState, reply.HappinessScore, reply.CounterPrice));
                Check(reply.InReplyTo == frame.Id, "reply " + reply.Turn + " answers " + reply.InReplyTo + ", not " + frame.Id);
                if (reply.IsTerminal) break;
            }

            // Let the events that follow the last reply (mood, stage, session.ended) arrive.
            var settle = DateTime.UtcNow + TimeSpan.FromSeconds(5);
            while (seen.Ended == null && DateTime.UtcNow < settle)
            {
                await Task.Delay(25).ConfigureAwait(false);
            }

            var stats = player.Stats;
            var replies = seen.RepliesCopy();
            var turns = replies.Select(r => r.Turn).ToList();
            int turnCount = turns.Count == 0 ? 0 : turns.Max();
            var missed = Enumerable.Range(1, turnCount).Where(t => !turns.Contains(t)).ToList();
            var doubled = turns.GroupBy(t => t).Where(g => g.Count() > 1).Select(g => g.Key).ToList();
            var answeredTwice = replies.Where(r => r.InReplyTo != null).GroupBy(r => r.InReplyTo)
                                       .Where(g => g.Count() > 1).Select(g => g.Key).ToList();
            string problem;
            bool contiguous = seen.Contiguous(out problem);
            Check(contiguous, "player: " + problem);
            Check(missed.Count == 0, "missed turns: " + string.Join(",", missed));
            Check(doubled.Count == 0, "turns applied twice: " + string.Join(",", doubled));
            Check(answeredTwice.Count == 0, "transcripts answered twice: " + string.Join(",", answeredTwice));
            Check(turnCount == sent.Count, turnCount + " turns for " + sent.Count + " transcripts");
            Check(player.PendingCount == 0, player.PendingCount + " frames never acknowledged");
            Check(seen.Ended != null && seen.Ended.Outcome == Outcomes.Deal,
                  "outcome " + (seen.Ended == null ? "none" : seen.Ended.Outcome) + ", expected deal");
            Check(stats.Reconnects >= 2, "only " + stats.Reconnects + " reconnects");
            Check(stats.Snapshots == 0, "the server answered a resume with a snapshot");

            // Drop 2 is deterministic: the server had applied the transcript, so the re-send is a duplicate,
            // and its reply (thrown away by the deaf client) came back through `resume`.
            AckResult deafAck = deafFrame.Acked.Result;
            Check(deafAck.Duplicate, "the re-sent transcript of the deaf drop was not acked as a duplicate");
            Check(deafAck.Attempts == 2, "the deaf-drop transcript went out " + deafAck.Attempts + " times, expected 2");
            AckResult droppedAck = droppedFrame.Acked.Result;

            // The server's own record must agree with what the client applied.
            var state = await Within(api.GetSessionAsync(info.SessionId, info.PlayerToken), Step, "GET the session")
                              .ConfigureAwait(false);
            Check(state.Seq == player.LastSeq, "server seq " + state.Seq + " but the client applied up to " + player.LastSeq);
            Check(state.Turn == turnCount, "server counted " + state.Turn + " turns, the client " + turnCount);
            Check(state.Outcome == Outcomes.Deal, "server outcome " + state.Outcome);
            var local = player.State;
            Check(local != null && local.Stage == state.Stage && local.HappinessScore == state.HappinessScore,
                  "the client's folded state differs from the server's");

            var seqs = seen.Seqs();
            Fact("turns", turnCount);
            Fact("outcome", seen.Ended != null ? seen.Ended.Outcome : null);
            Fact("final_price", seen.Ended != null && seen.Ended.Summary != null && seen.Ended.Summary.FinalPrice.HasValue
                                    ? (JToken)seen.Ended.Summary.FinalPrice.Value : JValue.CreateNull());
            Fact("first_quote", state.FirstQuote.HasValue ? (JToken)state.FirstQuote.Value : JValue.CreateNull());
            Fact("reconnects", stats.Reconnects);
            Fact("duplicates", stats.DuplicateAcks);
            Fact("resent", stats.FramesResent);
            Fact("resumes", stats.ResumesSent);
            Fact("stale_dropped", stats.StaleEventsDropped);
            Fact("gap_dropped", stats.GapEventsDropped);
            Fact("drop1", new JObject { { "frame", droppedFrame.Id }, { "duplicate", droppedAck.Duplicate },
                                        { "attempts", droppedAck.Attempts } });
            Fact("drop2", new JObject { { "frame", deafFrame.Id }, { "duplicate", deafAck.Duplicate },
                                        { "attempts", deafAck.Attempts } });
            Fact("seq", new JObject
            {
                { "welcome", seen.WelcomeSeq },
                { "first", seqs.Count > 0 ? seqs[0] : 0 },
                { "last", player.LastSeq },
                { "applied", seqs.Count },
                { "contiguous", contiguous },
            });
            Fact("missed_turns", new JArray(missed.ToArray()));
            Fact("doubled_turns", new JArray(doubled.ToArray()));
            Fact("deltas", seen.Deltas);
            var errors = seen.ErrorsCopy();
            Check(errors.Count == 0, "player errors: " + string.Join("; ", errors));
            Fact("dialogue", new JArray(replies.Select(r => (JToken)string.Format("{0}:{1}:{2}", r.Turn, r.NegotiationState,
                                                                                     r.CounterPrice)).ToArray()));
        }

        /// <summary>Drop 2: the client goes deaf, the server applies and answers the transcript, then
        /// the socket is aborted. Returns the transcript's pending frame.</summary>
        async Task<PendingFrame> DeafDropAsync(SamvadApi api, SessionInfo info, SamvadClient player, Recorder seen,
                                               string line, int turn)
        {
            // Wait until drop 1 is healed, so that this drop breaks a live connection.
            var heal = DateTime.UtcNow + Step;
            while (!player.IsConnected && DateTime.UtcNow < heal)
            {
                await Task.Delay(20).ConfigureAwait(false);
            }
            player.DebugDiscardIncoming = true;
            var frame = player.SendTranscript(line, 0.9, "hi-EN");
            var deadline = DateTime.UtcNow + Step;
            while (true)
            {
                var state = await api.GetSessionAsync(info.SessionId, info.PlayerToken).ConfigureAwait(false);
                // The server counts a turn once its reply is out: the deaf client has thrown it away.
                if (state.Turn >= turn) break;
                if (DateTime.UtcNow > deadline) throw new TimeoutException("the server never answered the deaf turn");
                await Task.Delay(20).ConfigureAwait(false);
            }
            Check(!frame.Acked.IsCompleted && !frame.Reply.IsCompleted, "the deaf client heard its ack or reply");
            // The client hears again by itself once this socket is gone, before it reconnects.
            player.ForceDrop();
            return frame;
        }
    }
}
