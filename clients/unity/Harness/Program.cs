// Console harness for Samvad.Client: plays a whole negotiation against a live server, breaking the
// connection twice on purpose, and proves that nothing was lost or applied twice.
//
//   mono clients/unity/bin/Harness.exe --url http://127.0.0.1:8000 [--timeout 45] [--verbose]
//   mono clients/unity/bin/Harness.exe --url ... --scenario kyoto-antiques [--level beginner] --say LINE ...
//     (the tour of one pack with the coaching commands: Run.Tour.cs, Run.Coaching.cs)
//   mono clients/unity/bin/Harness.exe --url ... --scene [--say LINE] [--voice utterance.wav]
//     (Samvad.Unity's MonoBehaviours in the Unity stand-in's player loop: Run.Scene*.cs)
//
// Drop 1 aborts the socket right after a transcript is queued: the frame may or may not have reached
// the server, and either way it must be answered exactly once. Drop 2 first makes the client deaf
// (incoming frames are thrown away, as if lost in the network), waits until the server has applied
// the transcript and answered it, then aborts: the reply must come back through `resume` and the
// re-sent transcript must be acknowledged as a duplicate.
//
// Prints one JSON line (the summary) on stdout; exit code 0 when every check passed.
//
// The harness, one file per part:
//   Program.cs            arguments, the time limit, the summary line
//   Run.cs                the run: offline checks, the two clients, the bad-token refusal
//   Run.Negotiation.cs    the negotiation with its two forced drops, and what it must add up to
//   Run.Tour.cs           the tour of one scenario pack: its lines, a barge-in, then the coaching
//   Run.Coaching.cs       the tour's coaching steps: playback, hints, undo, silence, stop and report
//   Run.OpenMic.cs        --open-mic FILE.wav: an open microphone; the server finds the turn
//   Run.Voice.cs          --voice FILE.wav: the microphone and playback helpers, with a barge-in
//   Run.Scene.cs          --scene: SamvadSession in a scene (grab, a turn, labels, events, close)
//   Run.SceneVoice.cs     --scene --voice FILE.wav: SamvadVoice (microphone, speaker, barge-in)
//   Recorder.cs           what one client saw, from its events
//   PoliteLearner.cs      the learner's lines

using System;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Samvad.Harness
{
    public static class Program
    {
        public static int Main(string[] args)
        {
            string url = null;
            int timeoutSeconds = 45;
            bool verbose = false;
            string learnerToken = Environment.GetEnvironmentVariable("SAMVAD_LEARNER_TOKEN");
            string scenario = null;
            string level = null;
            string voiceWav = null;
            string openMicWav = null;
            bool scene = false;
            var lines = new System.Collections.Generic.List<string>();
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
                    case "--learner-token":
                        learnerToken = args[++i];
                        break;
                    case "--scenario":
                        scenario = args[++i];
                        break;
                    case "--level":
                        level = args[++i];
                        break;
                    case "--open-mic":
                        openMicWav = args[++i];
                        break;
                    case "--voice":
                        voiceWav = args[++i];
                        break;
                    case "--scene":
                        scene = true;
                        break;
                    case "--say":
                        lines.Add(args[++i]);
                        break;
                    default:
                        Console.Error.WriteLine("unknown argument " + args[i]);
                        return 2;
                }
            }
            if (string.IsNullOrEmpty(url))
            {
                Console.Error.WriteLine("usage: mono Harness.exe --url http://127.0.0.1:PORT [--timeout S] [--verbose] [--learner-token T]"
                                        + " [--scenario ID [--level LEVEL] --say LINE [--say LINE ...]]"
                                        + " [--scene [--say LINE] [--voice FILE.wav]]");
                return 2;
            }
            var run = new Run(url, verbose) { LearnerToken = string.IsNullOrEmpty(learnerToken) ? null : learnerToken };
            JObject summary;
            if (scene)
            {
                // This thread is Unity's main thread: the scene runs its frames here, not in a task.
                run.Scene(TimeSpan.FromSeconds(timeoutSeconds), voiceWav, lines.Count > 0 ? lines[0] : Run.SceneLine);
            }
            else
            {
                RunTask(run, openMicWav != null ? run.OpenMicAsync(openMicWav)
                    : voiceWav != null ? run.VoiceAsync(voiceWav)
                    : scenario == null ? run.ExecuteAsync() : run.TourAsync(scenario, lines, level),
                    timeoutSeconds, verbose);
            }
            summary = run.Summary();
            Console.WriteLine(summary.ToString(Formatting.None));
            return (bool)summary["ok"] ? 0 : 1;
        }

        static void RunTask(Run run, System.Threading.Tasks.Task work, int timeoutSeconds, bool verbose)
        {
            try
            {
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
        }
    }
}
