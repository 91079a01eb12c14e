
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Samvad.Client;

namespace Samvad.Harness
{
    /// <summary>One harness run: its checks, its failures and the facts of its summary.</summary>
    sealed partial class Run
    {
        static readonly TimeSpan Step = TimeSpan.FromSeconds(15);

        readonly string _url;
        readonly bool _verbose;
        /// <summary>A learner credential (--learner-token): the sessions are that learner's, named by it.</summary>
        public string LearnerToken { get; set; }

        /// <summary>The learner id a run names when it has no credential (a development server takes it).</summary>
        string Learner(string name)
        {
            return LearnerToken == null ? name : null;
        }

        SamvadApi Api()
        {
            return new SamvadApi(_url) { Credential = LearnerToken };
        }
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

        static JToken Ms(double? value)
        {
            return value.HasValue ? (JToken)value.Value : JValue.CreateNull();
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
            foreach (int code in new[] { 1002, 1007, 1009, 4401, 4403, 4404, 4409 })
            {
                Check(!SamvadClient.MayReconnect(code), "the client would reconnect after " + code);
            }
            foreach (int code in new[] { 1001, 1006, 1011, 1012, 1013, 4408, 4410, 4429, 4430 })
            {
                Check(SamvadClient.MayReconnect(code), "the client would not reconnect after " + code);
            }
            Check(SamvadClient.MayReconnect(null), "the client would not reconnect after a network drop");
            CheckResampler(22050, 48000, 1024, 2);
            CheckResampler(16000, 44100, 512, 1);
            CheckResampler(24000, 48000, 256, 2);
            string id = SamvadClient.NewId("transcript");
            Check(id.Length <= 64 && id.All(c => c > ' ' && c <= '~'), "NewId made an invalid id: " + id);
        }

        /// <summary>The vendor's voice through <see cref="Resampler"/> over 200 callbacks of a numbered
        /// source: every output frame g plays sample floor(g * from / to), on every channel.</summary>
        void CheckResampler(int from, int to, int frames, int channels)
        {
            var resampler = new Resampler();
            long next = 0;
            Func<float[], int, int, int> numbered = (buffer, offset, count) =>
            {
                for (int i = 0; i < count; i++) buffer[offset + i] = next++;
                return count;
            };
            var data = new float[frames * channels];
            long g = 0, wrong = 0;
            const int callbacks = 200;
            for (int n = 0; n < callbacks; n++)
            {
                resampler.Fill(data, channels, from, to, numbered);
                for (int i = 0; i < frames; i++, g++)
                {
                    float due = g * from / to;
                    for (int c = 0; c < channels; c++) if (data[i * channels + c] != due) wrong++;
                }
            }
            long consumed = 1 + (long)callbacks * frames * from / to;
            string name = "resampler_" + from + "_" + to;
            Fact(name, new JObject { ["consumed"] = resampler.Consumed, ["due"] = consumed, ["wrong_frames"] = wrong });
            Check(wrong == 0, "Resampler " + from + " -> " + to + ": " + wrong + " samples off their source sample");
            Check(resampler.Consumed == consumed, "Resampler " + from + " -> " + to + " took " + resampler.Consumed
                  + " source samples where " + consumed + " are due");
        }

        public async Task ExecuteAsync()
        {
            CheckOffline();
            using (var api = Api())
            {
                var info = await api.CreateSessionAsync(new CreateSessionRequest { LearnerId = Learner("unity-harness") })
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
    }
}
