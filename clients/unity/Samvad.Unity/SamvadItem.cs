// Names the scenario item a grabbable stands for. Its own file: Unity only lets a MonoBehaviour be
// added as a component when the file is named after the class.
#if UNITY_5_3_OR_NEWER
using UnityEngine;

namespace Samvad.Unity
{
    /// <summary>Put on a grabbable to name the scenario item it is ("Tomato", "Apple", ...).
    /// Without it, SamvadSession uses the GameObject's name minus "(Clone)".</summary>
    public sealed class SamvadItem : MonoBehaviour
    {
        public string itemName = "Tomato";
    }
}
#endif
