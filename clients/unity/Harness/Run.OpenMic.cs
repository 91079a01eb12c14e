// The open microphone against a live server (docs/voice.md): stream a recorded line with pauses in
// it, in 100 ms chunks at the microphone's own pace, with silence after it, and never say when the
// learner stopped. The server must find the turn: partials at the pauses, then the turn's speech and
// its reply, all named `<stream>.1`.
//   mono Harness.exe --url URL --open-mic line.wav   (PCM16 mono 16 kHz, pauses inside, silence at the end)

using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using Samvad.Client;

namespace Samvad.Harness
{
    sealed partial class Run
    {
        public async Task OpenMicAsync(string wavPath)
        {
            byte[] pcm = ReadPcm(File.ReadAllBytes(wavPath));
            using (var api = Api())
            {
                var info = await api.CreateSessionAsync(new CreateSessionRequest { LearnerId = Learner("unity-open-mic") })
                                    .ConfigureAwait(false);
                var player = new SamvadClient(_url, info.SessionId, info.PlayerToken, Options(false));
                var turnEnded = new TaskCompletionSource<SpeechEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
                var replied = new TaskCompletionSource<ReplyEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
                int partials = 0;
                long firstPartialSeq = -1;
                string lastPartial = null;
                try
                {
                    await Within(player.ConnectAsync(), Step, "connecting the player").ConfigureAwait(false);
                    using (var mic = player.OpenMicrophone())
                    {
                        mic.Partial += p =>
                        {
                            if (Interlocked.Increment(ref partials) == 1) Interlocked.Exchange(ref firstPartialSeq, p.Seq);
                            Volatile.Write(ref lastPartial, p.Text);
                        };
                        mic.TurnEnded += s => turnEnded.TrySetResult(s);
                        mic.Reply += r => replied.TrySetResult(r);
                        // 20 ms of samples every 20 ms, as a microphone callback gives them.
                        for (int i = 0; i < pcm.Length; i += 640)
                        {
                            mic.Write(pcm, i, Math.Min(640, pcm.Length - i));
                            if (i % 3200 == 0) await Task.Delay(20).ConfigureAwait(false);
                        }
                        var speech = await Within(turnEnded.Task, Step, "the end of the open microphone's turn")
                                           .ConfigureAwait(false);
                        Check(speech.Id == mic.Id + ".1", "the turn is the stream's first");
                        Check(!string.IsNullOrEmpty(speech.Text), "the turn has words");
                        var reply = await Within(replied.Task, Step, "the reply to the turn").ConfigureAwait(false);
                        Check(reply.InReplyTo == speech.Id && reply.Mark == null, "the turn was answered as a turn");
                        Check(Volatile.Read(ref partials) >= 1, "a partial came at a pause");
                        Check(Interlocked.Read(ref firstPartialSeq) < speech.Seq, "the partials came before the turn's speech");
                        Fact("open_mic_id", mic.Id);
                        Fact("open_mic_seconds", mic.Seconds);
                        Fact("open_mic_chunks", mic.ChunksSent);
                        Fact("partials", Volatile.Read(ref partials));
                        Fact("last_partial", Volatile.Read(ref lastPartial));
                        Fact("turn_id", speech.Id);
                        Fact("speech_text", speech.Text);
                        Fact("stt", speech.Stt);
                        Fact("reply_in_reply_to", reply.InReplyTo);
                        Fact("reply_turn", reply.Turn);
                        Fact("reply_text", reply.Text);
                        Fact("end_of_turn_ms", Ms(speech.EndOfTurnMs));
                        Fact("reply_end_of_turn_ms", Ms(reply.Timings == null ? null : reply.Timings.EndOfTurnMs));
                    }
                }
                finally
                {
                    await player.CloseAsync().ConfigureAwait(false);
                }
            }
        }
    }
}
